"""The accelerator code paths, exercised here with the real frameworks on the CPU where the behaviour
can be shown, and with the frameworks' own messages where only a device shows it (issue 11's items;
docs/accelerators.md says which parts only a device can test)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from quick_compile import quick_xla_in_process  # noqa: F401  (the fixture, used by name)

from xpubench import envnames
from xpubench.case import Case
from xpubench.launch import worker
from xpubench.launch.dispatch import add_described

pytestmark = pytest.mark.usefixtures("quick_xla_in_process")   # what is computed, not how fast

CPU_CASE = Case(workload="mnist_cnn", backend="jax", device="cpu", mode="train", batch_size=8, train_samples=32,
                eval_samples=12, epochs=2, steps=2)


# --- 2: XLA:GPU has no int8 convolution ------------------------------------------------------------

@pytest.mark.slow
def test_int8_convolutions_are_not_applicable_on_a_jax_gpu_but_dense_layers_and_weight_only_are():
    import jax

    from xpubench.backends.jax_ import quant
    from xpubench.workloads import get_workload

    def qparams(workload):
        """The int8 params of parameters of the model's own shapes (jax.eval_shape of its init: nothing
        compiled, ~2-5 CPU s a model; which layers are convolutions is what is read)."""
        wl = get_workload(workload)
        spec = wl.spec
        x = np.zeros((1, *spec.input_shape), np.int32 if spec.input_kind == "tokens" else np.float32)
        shapes = jax.eval_shape(lambda: wl.models["jax"](spec).init(jax.random.key(0), x, train=False))["params"]
        return quant.quantize_params(jax.tree.map(lambda s: np.ones(s.shape, s.dtype), shapes))[0]

    cnn, lstm = qparams("mnist_cnn"), qparams("imdb_lstm")
    said = quant.platform_problem("gpu", "dynamic", cnn)
    assert "XLA:GPU has no int8 convolution" in said and "jax-ml/jax#7637" in said and "weight_only" in said
    assert quant.platform_problem("gpu", "weight_only", cnn) is None
    assert (quant.platform_problem("cpu", "dynamic", cnn) is None
            and quant.platform_problem("tpu", "dynamic", cnn) is None)
    assert quant.platform_problem("gpu", "dynamic", lstm) is None


@pytest.mark.slow
def test_a_jax_int8_cnn_case_on_a_gpu_is_skipped_with_the_reason(monkeypatch):
    from xpubench.backends.jax_ import infer
    from xpubench.harness.inference import NotApplicable

    session = infer.JaxSession(dataclasses.replace(CPU_CASE, mode="infer", precision="int8"))
    monkeypatch.setattr(infer, "kind_of", lambda device: "gpu")
    with pytest.raises(NotApplicable, match="XLA:GPU has no int8 convolution"):
        session.precheck("int8")


# --- 3: the address-space cap is for CPU cases only ------------------------------------------------

@pytest.mark.parametrize(("device", "capped"), [("cpu", True), ("gpu:0", False), ("tpu:0", False), ("mps", False)])
def test_memory_limit_caps_cpu_workers_only(device, capped):
    code = ("import resource; from xpubench.launch.worker import apply_memory_limit; "
            f"apply_memory_limit({device!r}); print(resource.getrlimit(resource.RLIMIT_AS)[0])")
    env = dict(os.environ, **{envnames.MEMORY_LIMIT: str(3 << 30)})
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=60)
    import resource

    assert (int(out.stdout) == 3 << 30) is capped and (capped or int(out.stdout) == resource.RLIM_INFINITY)


# --- 9: workers set JAX's memory and platform before any framework import ---------------------------

def test_workers_never_preallocate_and_cpu_cases_see_no_accelerator():
    environ: dict = {}
    worker.prepare_environment("cpu", environ)
    assert environ == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "JAX_PLATFORMS": "cpu"}
    environ = {"XLA_PYTHON_CLIENT_PREALLOCATE": "true", "JAX_PLATFORMS": "cuda"}   # the user's choice, recorded
    worker.prepare_environment("gpu:0", environ)
    assert environ == {"XLA_PYTHON_CLIENT_PREALLOCATE": "true", "JAX_PLATFORMS": "cuda"}


# --- 10: one peak-memory definition -----------------------------------------------------------------

def test_host_peak_is_reset_right_before_measuring():
    """Fresh pages from the OS (an anonymous mmap, touched), not numpy's: an allocator may hand back pages it
    kept resident from earlier tests, which no counter sees (the order-dependence of issue 21)."""
    import mmap

    from xpubench.devices import memory

    if memory._vm_hwm() is None:
        pytest.skip("needs Linux /proc")

    def touched(nbytes: int) -> mmap.mmap:
        region = mmap.mmap(-1, nbytes)
        region.write(b"\x01" * nbytes)
        return region

    touched(96 << 20).close()
    memory.reset_host_peak()
    base = memory.host_current_bytes()
    small = touched(32 << 20)
    peak = memory.host_peak_bytes()
    assert 30 << 20 <= peak - base < 90 << 20         # the earlier 96 MiB is not in it
    small.close()


@pytest.mark.parametrize(("platform", "factor"), [("darwin", 1), ("linux", 1024)])
def test_ru_maxrss_units_and_a_peak_that_cannot_be_reset(monkeypatch, platform, factor):
    import resource

    from xpubench.devices import memory

    monkeypatch.setattr(memory, "_vm_hwm", lambda: None)
    monkeypatch.setattr(memory, "_CLEAR", SimpleNamespace(write_text=lambda _: (_ for _ in ()).throw(OSError())))
    monkeypatch.setattr(memory.sys, "platform", platform)
    rss = {"value": 1000}
    monkeypatch.setattr(resource, "getrusage", lambda who: SimpleNamespace(ru_maxrss=rss["value"]))
    memory.reset_host_peak()
    assert memory.host_peak_bytes() is None            # nothing above the peak at the reset: unknown
    rss["value"] = 3000
    assert memory.host_peak_bytes() == 3000 * factor   # macOS: bytes already (x1024 would overstate)


class StatsDevice(SimpleNamespace):
    def memory_stats(self):
        return {"peak_bytes_in_use": self.peaks.pop(0)}


def test_jax_peak_is_reported_only_when_the_measurement_raised_it(monkeypatch):
    import jax

    from xpubench.backends.jax_.device import PeakMemory

    monkeypatch.setattr("xpubench.devices.memory.reset_host_peak", lambda: None)
    monkeypatch.setattr(jax, "process_index", lambda: 0)

    def read(before, after):
        devices = [StatsDevice(platform="gpu", process_index=0, peaks=[b, a]) for b, a in zip(before, after)]
        counter = PeakMemory(devices)
        counter.reset()
        return counter.read()

    assert read([100], [150]) == 150                   # raised: the region's own peak
    assert read([100], [100]) is None                  # an earlier phase was higher: unknown, not 100
    assert read([100, 50], [120, 50]) == 120           # 120 >= the other device's bound 50
    assert read([100, 200], [120, 200]) is None        # device 2's region peak could be up to 200


def test_training_and_inference_reset_the_peak_after_compiling_before_the_first_timed_call():
    from xpubench.harness.inference import measure
    from xpubench.harness.training import run_training

    events = []

    class Fake:
        steps_per_epoch, global_batch, n, batch = 2, 4, 8, 4

        def compile(self):
            events.append("compile")

        def reset_peak_memory(self):
            events.append("reset")

        def start_epoch(self, epoch):
            pass

        def step(self, i):
            events.append("step")
            return 1.0

        predict = step

        def sync(self, handle):
            pass

        def loss_value(self, h):
            return 1.0

        def evaluate(self):
            return 1.0, 0.5

        def host(self, h):
            return np.zeros((4, 1), np.float32)

        def model_bytes(self):
            return 1

        def placement(self):
            return "cpu"

        def peak_memory(self):
            return 1

    run_training(Fake(), dataclasses.replace(CPU_CASE, epochs=1), 1.0)
    assert events[:3] == ["compile", "reset", "step"]
    events.clear()
    measure(Fake(), budget_s=0.01)
    assert events[:3] == ["compile", "reset", "step"]


# --- 9 and 11: the dropout key folded inside the compiled step; JAX evaluation data on the device, its step
# compiled ahead (one trainer, built and compiled once, shows both) -------------------------------------

@pytest.mark.slow
def test_jax_steps_draw_no_eager_keys_and_evaluation_copies_nothing_and_compiles_nothing(monkeypatch):
    """No eager jax.random work per step (it ran on the default device, a GPU, inside timed steps), and
    the timed evaluation pass neither copies to the device nor compiles lazily."""
    import jax

    from xpubench.backends.jax_.train import JaxTrainer

    waited = []
    real_wait = JaxTrainer.wait_for_uploads
    monkeypatch.setattr(JaxTrainer, "wait_for_uploads", lambda self: waited.append(True) or real_wait(self))
    trainer = JaxTrainer(CPU_CASE)
    assert waited == [True]                                     # uploads awaited before any clock
    trainer.compile()
    assert isinstance(trainer._eval, jax.stages.Compiled)       # no lazy compile in the first timed eval
    calls = []
    real_fold_in = jax.random.fold_in
    monkeypatch.setattr(jax.random, "fold_in", lambda *a: calls.append(a) or real_fold_in(*a))
    trainer.start_epoch(0)
    losses = [float(trainer.step(i)) for i in range(2)]
    assert calls == [] and all(np.isfinite(losses))
    monkeypatch.setattr(jax, "device_put", lambda *a, **k: pytest.fail("host-to-device copy inside eval"))
    loss, metric = trainer.evaluate()
    assert np.isfinite(loss) and 0 <= metric <= 1


# --- 8: fp16 training scales the loss --------------------------------------------------------------

def test_jax_loss_scaling_recovers_gradients_that_underflow_fp16():
    import jax
    import jax.numpy as jnp

    from xpubench.backends.jax_ import loss_scale

    def objective(p):    # an activation of 1e-3 meets an upstream gradient of 1e-5: 1e-8 underflows fp16
        y = p.astype(jnp.float16) * jnp.float16(1e-3)
        return y.astype(jnp.float32).sum() * 1e-5, None

    params = jnp.ones((4,), jnp.float32)
    plain = jax.grad(lambda p: objective(p)[0])(params)
    assert float(jnp.abs(plain).max()) == 0.0                   # lost without scaling
    (_, _), grads, finite = loss_scale.scaled_grad(objective, params, loss_scale.init())
    assert bool(finite) and np.allclose(np.asarray(grads), 1e-8, rtol=1e-2)


def test_the_loss_scale_halves_and_skips_on_overflow_and_grows_after_2000_good_steps():
    import jax.numpy as jnp

    from xpubench.backends.jax_ import loss_scale

    state = loss_scale.init()
    bad = loss_scale.next_state(state, jnp.bool_(False))
    assert float(bad["scale"]) == 2.0**15 and int(bad["good_steps"]) == 0
    kept = loss_scale.keep_if(jnp.bool_(False), {"w": jnp.ones(2)}, {"w": jnp.zeros(2)})
    assert float(kept["w"].sum()) == 0                          # the step is skipped
    almost = {"scale": jnp.float32(2.0**16), "good_steps": jnp.int32(1999)}
    grown = loss_scale.next_state(almost, jnp.bool_(True))
    assert float(grown["scale"]) == 2.0**17 and int(grown["good_steps"]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_fp16_training_records_its_loss_scaling(backend):
    from xpubench.launch.dispatch import run_case

    outcome = run_case(dataclasses.replace(CPU_CASE, backend=backend, precision="fp16"))
    assert outcome.status == "ok" and outcome.metrics["final_loss_scale"] > 0
    assert "halved and the step skipped" in outcome.metrics["loss_scaling"]


# --- 6: torch.compile "auto" falls back to eager, with the reason -----------------------------------

def test_compile_auto_is_eager_where_inductor_cannot_work(monkeypatch):
    import importlib.util

    import torch

    from xpubench.backends.torch_ import train

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "triton" else real(name, *a))
    cuda = torch.device("cuda", 0)
    compiled, note = train.compile_choice(dataclasses.replace(CPU_CASE, compile="auto"), cuda)
    assert not compiled and "Triton is not installed" in note
    assert train.compile_choice(dataclasses.replace(CPU_CASE, compile="on"), cuda) == (True, None)
    assert train.compile_choice(CPU_CASE, torch.device("cpu")) == (False, None)


@pytest.mark.slow
def test_a_failing_torch_compile_under_auto_trains_eager_and_says_why(monkeypatch):
    import torch

    from xpubench.backends.torch_ import train
    from xpubench.harness.training import run_training

    class Broken(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("InductorError: Failed to find C compiler. Please specify via CC environment variable.")

    monkeypatch.setattr(train, "compile_choice", lambda case, device: (True, None))
    monkeypatch.setattr(torch, "compile", lambda net: Broken())
    case = dataclasses.replace(CPU_CASE, backend="torch")
    trainer = train.TorchTrainer(case)
    outcome = run_training(trainer, case, trainer.flops_per_sample)
    add_described(outcome.metrics, trainer)
    assert outcome.metrics["compiled"] is False and outcome.metrics["compile_s"] is None
    assert "torch.compile failed (RuntimeError: InductorError: Failed to find C compiler" in outcome.metrics["warning"]
    with pytest.raises(RuntimeError, match="Failed to find C compiler"):
        train.TorchTrainer(dataclasses.replace(case, compile="on")).compile()


# --- 12: autocast that turns itself off is an error; result-changing variables are recorded ---------

def test_autocast_that_disables_itself_is_an_error(monkeypatch):
    import torch

    from xpubench.backends.torch_.device import checked_autocast

    with checked_autocast(torch.device("cpu"), "bf16"):
        assert torch.is_autocast_enabled("cpu")

    class MpsAutocast:              # what torch 2.2-2.5 does for bf16 on MPS before macOS 14
        def __init__(self, device_type, dtype):
            warnings.warn("In MPS autocast, but the target dtype is not supported on macOS versions below 14. "
                          "Disabling autocast.", stacklevel=2)
            self._enabled = False

    monkeypatch.setattr(torch, "autocast", MpsAutocast)
    with pytest.raises(RuntimeError, match="bf16 autocast is not available on mps.*silently run in fp32"):
        checked_autocast(SimpleNamespace(type="mps"), "bf16")


def test_result_changing_variables_are_recorded_in_the_fingerprint_and_named_once(monkeypatch):
    from xpubench.backends.fingerprint import fingerprint
    from xpubench.devices import envvars
    from xpubench.report.tables import environment

    for name in ("NVIDIA_TF32_OVERRIDE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "TPU_VISIBLE_CHIPS", "HIP_VISIBLE_DEVICES",
                 "OMP_WAIT_POLICY"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("UNRELATED_VARIABLE", "x")
    env = fingerprint({})["env"]
    assert {"NVIDIA_TF32_OVERRIDE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "TPU_VISIBLE_CHIPS",
            "HIP_VISIBLE_DEVICES", "OMP_WAIT_POLICY"} <= set(env) and "UNRELATED_VARIABLE" not in env
    assert environment.ENV_VARS == envvars.NAMES
    assert [line.split("=")[0] for line in envvars.silent_changes(env)] == ["NVIDIA_TF32_OVERRIDE"]


# --- 13: autotuning on both sides, recorded ----------------------------------------------------------

def test_autotuning_is_recorded(monkeypatch):
    import torch

    from xpubench.backends.jax_.train import autotune_setting
    from xpubench.backends.torch_.device import set_autotune

    gpu = SimpleNamespace(platform="gpu")
    assert autotune_setting(gpu) == "XLA autotuning, xla_gpu_autotune_level 4 (default)"
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_autotune_level=0")
    assert autotune_setting(gpu).endswith("level 0") and autotune_setting(SimpleNamespace(platform="cpu")) is None
    before = torch.backends.cudnn.benchmark
    assert set_autotune(torch.device("cpu")) is None and torch.backends.cudnn.benchmark == before


# --- 16: int8 against the int8 peak; tf32 only where it is TF32 -------------------------------------

def test_int8_mfu_is_against_the_int8_peak():
    from xpubench.analysis.peak import add_peak_metrics
    from xpubench.case import Case

    fp = {"backends": {"torch": {"devices": [{"id": "gpu:0", "peak_flops": {"fp32": 67e12, "int8": 1979e12}}]}}}
    metrics = {"achieved_flops_per_s": 197.9e12}
    add_peak_metrics(metrics, Case("resnet", "torch", "gpu:0", "infer", "int8", batch_size=8), fp)
    assert metrics["peak_flops_per_s"] == 1979e12 and metrics["mfu"] == pytest.approx(0.1)


@pytest.mark.parametrize(("kind", "vendor", "capability", "applies"), [
    ("gpu", "nvidia", "9.0", True), ("gpu", "nvidia", "8.0", True), ("gpu", "nvidia", "7.5", False),
    ("gpu", "amd", None, False), ("tpu", None, None, False), ("cpu", None, None, False), ("mps", None, None, False),
    ("gpu", "nvidia", "gfx942", False)])
def test_tf32_applies_to_nvidia_ampere_and_later_only(kind, vendor, capability, applies):
    from xpubench.devices.records import tf32_problem

    assert (tf32_problem(kind, vendor, capability) is None) is applies


def test_a_tf32_case_elsewhere_is_skipped_with_the_reason():
    from xpubench.launch.dispatch import run_case

    for backend in ("torch", "jax"):
        out = run_case(Case(workload="matmul", backend=backend, device="cpu", mode="matmul", precision="tf32", size=64))
        assert out.status == "skipped" and "NVIDIA GPUs (compute capability >= 8.0)" in out.message


def test_jax_tf32_is_tensorfloat32_in_matmul_as_in_training():
    import jax

    from xpubench.backends.jax_.matmul import product_fn
    from xpubench.backends.jax_.model import matmul_precision

    x = np.ones((4, 4), np.float32)
    text = jax.jit(product_fn("tf32")).lower(x, x).as_text()
    assert "HIGH" in text and "HIGHEST" not in text and matmul_precision("tf32") == "tensorfloat32"


# --- 17: the full device id, read from an output ----------------------------------------------------

def test_placement_compares_the_device_index_not_only_its_kind():
    from xpubench.launch.runner import placement_problem

    case = Case(workload="matmul", backend="torch", device="gpu:0", mode="matmul", size=1024)
    assert placement_problem(case, "gpu:1") == "ran on gpu:1, not on the requested gpu:0"
    assert placement_problem(case, "cuda:0") is None and placement_problem(case, "cpu") is not None
    many = Case(workload="mnist_cnn", backend="jax", device="cpu", mode="train", batch_size=256, devices=8)
    assert placement_problem(many, "cpu:0..7 (8 devices)") is None


def test_inference_placement_is_read_from_a_prediction():
    import torch

    from xpubench.backends.torch_.infer import TorchPredictor

    predictor = TorchPredictor(torch.nn.Linear(3, 2), torch.zeros(5, 3), 2, torch.device("cpu"))
    calls = []
    predictor.predict = lambda i: calls.append(i) or torch.zeros(2, 2)
    assert predictor.placement() == "cpu" and calls == [0]


def test_ddp_binds_its_device_except_where_that_hangs_nccl():
    from xpubench.backends.torch_.ddp import device_id_kwargs

    assert "device_id" in device_id_kwargs("2.4.1+cu124", 3) and device_id_kwargs("2.7.0+cu128", 3) == {}
    assert "device_id" in device_id_kwargs("2.7.1", 0)
