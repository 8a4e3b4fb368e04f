"""The second round of accelerator defects (issue 22; docs/accelerators.md, 18-29), each shown on this CPU
with the device faked: fake framework modules and functions, device properties as the stacks report
them, and the recorded machine descriptions (tests/data/machines/). Every test here failed before its fix."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import shlex
from types import SimpleNamespace

import numpy as np
import pytest
from machine_facts import MACHINES

from xpubench import backends, envnames
from xpubench.case import Case
from xpubench.plan import PlanRequest, build_cases
from xpubench.plan.notes import plan_notes

MULTI = {envnames.NUM_PROCESSES: "2", envnames.COORDINATOR: "10.0.0.1:1234", envnames.PROCESS_ID: "0"}


def machine(name: str) -> dict:
    return json.loads((MACHINES / f"{name}.json").read_text())


def fake_jax_device(platform="gpu", kind="NVIDIA H100 80GB HBM3", capability="9.0"):
    return SimpleNamespace(platform=platform, device_kind=kind, compute_capability=capability, process_index=0, id=0)


# --- 1: a multi-host JAX case joins the cluster before it asks for a device ----------------------------

def test_a_multi_process_jax_case_joins_the_cluster_before_any_device_query(monkeypatch):
    from xpubench.backends import jax_
    from xpubench.backends.jax_ import device, distributed

    for name, value in MULTI.items():
        monkeypatch.setenv(name, value)
    events = []
    monkeypatch.setattr(distributed, "initialize", lambda world=None: events.append("initialize") or
                        distributed.handed())
    monkeypatch.setattr(distributed, "check_same_case", lambda key, gather=None: events.append("same case"))
    monkeypatch.setattr(distributed, "mesh_devices", lambda *a, **k: events.append("devices") or [fake_jax_device()])
    monkeypatch.setattr(device, "jax_devices", lambda *a, **k: events.append("devices") or [fake_jax_device()])
    case = Case(workload="mnist_cnn", backend="jax", device="gpu:0", mode="train", precision="tf32", batch_size=256,
                devices=2)
    assert jax_.BACKEND.unsupported(case) is None          # H100: tf32 applies
    assert events == ["initialize", "same case", "devices"]   # jax 0.10 refuses initialize after jax.devices()


# --- 2: hosts of a multi-host run stay in step (process 0 decides for all: tests/test_launchers.py) -------

def test_peers_running_another_case_are_refused_by_every_process():
    from xpubench.backends.jax_.distributed import KEY_BYTES, check_same_case

    def gather_with(other: str):
        theirs = np.frombuffer(other.encode().ljust(KEY_BYTES, b"\0"), np.uint8)
        return lambda mine: np.stack([mine, theirs])

    check_same_case("mnist_cnn/jax/gpu:0/train/bf16/b8", gather_with("mnist_cnn/jax/gpu:0/train/bf16/b8"))
    with pytest.raises(RuntimeError, match=r"out of step \(process 0: mnist.*b8; process 1: gpt/jax.*\)"):
        check_same_case("mnist_cnn/jax/gpu:0/train/bf16/b8", gather_with("gpt/jax/gpu:0/train/bf16/b16"))


# --- 3: ROCm: no MIOpen exhaustive search, the find mode chosen and recorded ----------------------------

def test_rocm_keeps_miopens_exhaustive_search_off_and_records_its_find_mode(monkeypatch):
    import torch

    from xpubench.backends.torch_.device import set_autotune

    monkeypatch.setattr(torch.backends.cudnn, "benchmark", torch.backends.cudnn.benchmark)   # restored after
    monkeypatch.setattr(torch.version, "hip", "6.2.41133-dd7f95766")
    environ: dict = {}
    said = set_autotune(torch.device("cuda", 0), environ)
    assert torch.backends.cudnn.benchmark is False          # True is MIOpen's minutes-per-shape search
    assert environ == {"MIOPEN_FIND_MODE": "DYNAMIC_HYBRID"} and "MIOpen find mode DYNAMIC_HYBRID" in said
    assert "MIOpen find mode NORMAL" in set_autotune(torch.device("cuda", 0), {"MIOPEN_FIND_MODE": "NORMAL"})
    monkeypatch.setattr(torch.version, "hip", None)
    assert set_autotune(torch.device("cuda", 0), {}) == "cudnn.benchmark" and torch.backends.cudnn.benchmark


# --- 4: GPU energy from the board the framework runs on -------------------------------------------------

class FakeNvml(SimpleNamespace):
    """pynvml as the meter uses it: boards by index or UUID, their names, a rising counter."""

    def __init__(self, names=("NVIDIA H100 80GB HBM3",) * 8):
        super().__init__(names=list(names), opened=[])

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return len(self.names)

    def nvmlDeviceGetHandleByIndex(self, i):
        self.opened.append(("index", i))
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid):
        self.opened.append(("uuid", uuid))
        return uuid

    def nvmlDeviceGetName(self, handle):
        return self.names[handle]

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return 1000 * (len(self.opened) + 1)


def test_torch_gpu_energy_reads_the_board_by_its_uuid_whatever_cuda_visible_devices_says(monkeypatch):
    import torch

    from xpubench.energy.gpu import NvmlMeter
    from xpubench.energy.windows import meter_for_case

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4")          # torch's gpu:0 is physical GPU 4
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda d: SimpleNamespace(uuid="ffc79498-8ff3-c2dc-3b0d-fafd804516ae"))
    case = Case(workload="mnist_cnn", backend="torch", device="gpu:0", mode="train", batch_size=256)
    meter = meter_for_case(case, backends.get("torch").gpu_identity)
    assert isinstance(meter, NvmlMeter)
    meter._module = nvml = FakeNvml()
    meter.start()
    assert meter.stop().joules is not None
    assert nvml.opened == [("uuid", "GPU-ffc79498-8ff3-c2dc-3b0d-fafd804516ae")]    # never NVML's index 0


def test_jax_on_an_amd_gpu_reads_amd_smi_on_the_visible_board(monkeypatch):
    from xpubench.backends.jax_ import device
    from xpubench.energy.gpu import AmdSmiMeter
    from xpubench.energy.windows import meter_for_case

    monkeypatch.setattr(device, "jax_devices", lambda *a: [fake_jax_device("gpu", "AMD Instinct MI300X", "gfx942")])
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "4,5")
    monkeypatch.delenv("ROCR_VISIBLE_DEVICES", raising=False)
    case = Case(workload="mnist_cnn", backend="jax", device="gpu:1", mode="train", batch_size=256)
    meter = meter_for_case(case, backends.get("jax").gpu_identity)
    assert isinstance(meter, AmdSmiMeter) and meter.index == 5            # not NVML (n/a), not board 1


def test_visible_device_lists_map_a_framework_index_to_the_machines():
    from xpubench.energy.gpu import physical_gpu
    from xpubench.energy.meter import Unreadable

    assert physical_gpu(0, "nvidia", {}) == 0
    assert physical_gpu(1, "nvidia", {"CUDA_VISIBLE_DEVICES": "4,6"}) == 6
    assert physical_gpu(0, "nvidia", {"CUDA_VISIBLE_DEVICES": "GPU-8f2e,GPU-1a"}) == "GPU-8f2e"
    assert physical_gpu(0, "amd", {"ROCR_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "1"}) == 3
    assert physical_gpu(1, "amd", {"CUDA_VISIBLE_DEVICES": "0,7"}) == 7                  # HIP reads it too
    with pytest.raises(Unreadable, match="lists no GPU 2"):
        physical_gpu(2, "nvidia", {"CUDA_VISIBLE_DEVICES": "4,5"})


def test_an_nvml_index_is_trusted_only_where_cuda_numbers_gpus_as_nvml_does():
    from xpubench.energy import meter_for

    mixed = FakeNvml(("NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"))
    meter = meter_for("gpu:0", vendor="nvidia", environ={"CUDA_VISIBLE_DEVICES": "1"})
    meter._module = mixed
    meter.start()
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in meter.stop().reason
    ordered = meter_for("gpu:0", vendor="nvidia",
                        environ={"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    ordered._module = mixed
    ordered.start()
    assert ordered.stop().joules is not None and ("index", 1) in mixed.opened


# --- 5: Keras cases get their device's peak and MFU ----------------------------------------------------

def test_keras_cases_get_the_peak_of_the_device_their_framework_runs_on():
    from xpubench.analysis.peak import add_peak_metrics
    from xpubench.case import Case

    fp = machine("h100-sxm")
    jax_peak = next(d for d in fp["backends"]["jax"]["devices"] if d["id"] == "gpu:0")["peak_flops"]["bf16"]
    metrics = {"achieved_flops_per_s": jax_peak / 4}
    add_peak_metrics(metrics, Case("mnist_cnn", "keras:jax", "gpu:0", "train", "bf16", batch_size=8), fp)
    assert metrics["peak_flops_per_s"] == jax_peak and metrics["mfu"] == pytest.approx(0.25)


# --- 6: doctor's CUDA events on the stream of the device it measures -----------------------------------

def test_doctor_records_its_events_on_the_measured_devices_stream(monkeypatch):
    import torch

    from xpubench.backends.torch_.doctor import event_window

    recorded, entered = [], []

    class Event:
        def __init__(self, enable_timing=False):
            pass

        def record(self, stream=None):
            recorded.append(stream)

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return 5.0

    @contextlib.contextmanager
    def on_device(device):
        entered.append(device.index)
        yield

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "device", on_device)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: f"stream of gpu {device.index}")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    seconds, _ = event_window(torch.device("cuda", 1))(lambda: None, 3)
    assert recorded == ["stream of gpu 1"] * 2 and entered == [1] and seconds == pytest.approx(0.005)


# --- 7: every worker compiles with empty caches ---------------------------------------------------------

def test_every_worker_process_gets_empty_compilation_caches_of_its_own(tmp_path):
    from xpubench import backends
    from xpubench.launch import worker

    first, second = {}, {}
    worker.prepare_environment("gpu:0", first, scratch=tmp_path / "a")
    worker.prepare_environment("gpu:0", second, scratch=tmp_path / "b")
    assert first["TORCHINDUCTOR_CACHE_DIR"].startswith(str(tmp_path / "a"))
    assert first["TRITON_CACHE_DIR"].startswith(str(tmp_path / "a"))
    assert second["TORCHINDUCTOR_CACHE_DIR"].startswith(str(tmp_path / "b"))
    torch, jax = backends.get("torch"), backends.get("jax")
    assert torch.warm_cache_note(first) is None
    users = {"TORCHINDUCTOR_CACHE_DIR": "/home/me/.inductor"}
    worker.prepare_environment("gpu:0", users, scratch=tmp_path / "c")
    assert users["TORCHINDUCTOR_CACHE_DIR"] == "/home/me/.inductor"          # the user's choice, said
    assert "/home/me/.inductor" in torch.warm_cache_note(users)
    assert "Inductor's default cache" in torch.warm_cache_note({})          # in-process: /tmp's shared one
    assert jax.warm_cache_note({"JAX_COMPILATION_CACHE_DIR": "/cache"}) is not None


def test_the_worker_gives_its_private_folder_as_the_scratch(monkeypatch, tmp_path):
    from xpubench.launch import worker
    from xpubench.results.outcome import Outcome

    seen = {}
    monkeypatch.setattr(worker, "watch_parent", lambda: None)
    monkeypatch.setattr(worker, "prepare_environment", lambda device, scratch=None: seen.update(scratch=scratch))
    monkeypatch.setattr(worker, "execute", lambda case: Outcome(status="ok"))
    case_path = tmp_path / "case.json"
    case_path.write_text(json.dumps(Case(workload="matmul", backend="numpy", device="cpu", mode="matmul",
                                         size=1024).as_dict()))
    assert worker.main([str(case_path), str(tmp_path / "result.json")]) == 0
    assert seen["scratch"] == tmp_path


# --- 8: no "fp16" on a TPU -------------------------------------------------------------------------------

def test_a_tpu_plans_no_fp16_and_an_fp16_case_there_is_skipped(monkeypatch, capsys, tmp_path):
    from xpubench.backends import jax_, keras_
    from xpubench.backends.jax_ import device
    from xpubench.cli import main

    cases = build_cases(PlanRequest(quick=True), machine("tpu-v5e-8"))
    assert not [c.key for c in cases if c.device.startswith("tpu") and c.precision == "fp16"]
    monkeypatch.chdir(tmp_path)
    assert main(shlex.split(f"run --dry-run --env-file {MACHINES / 'tpu-v5e-8.json'}")) == 0
    out = capsys.readouterr().out
    assert "/tpu:0/" in out and not [line for line in out.splitlines() if "/tpu:0/" in line and "/fp16/" in line]
    monkeypatch.setattr(device, "jax_devices", lambda *a: [fake_jax_device("tpu", "TPU v5 lite", None)])
    for backend in (jax_.BACKEND, keras_.BACKEND):
        case = Case(workload="matmul", backend=backend.name, device="tpu:0", mode="matmul", precision="fp16", size=1024)
        assert "fp16 is not a TPU format" in backend.unsupported(case)


# --- 9: the bandwidth arrays are larger than an MI300X's Infinity Cache ---------------------------------

def test_mi300x_bandwidth_arrays_are_four_times_its_infinity_cache(monkeypatch):
    import torch

    from xpubench.backends.torch_.ceiling import default_array_bytes
    from xpubench.harness.bandwidth import array_note

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: SimpleNamespace(L2_cache_size=4 << 20))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d: (190 << 30, 192 << 30))   # what ROCm reports
    size = default_array_bytes(torch.device("cuda", 0))
    assert size >= 4 * (256 << 20)                                  # was 64 MiB: served from the 256 MB cache
    assert "above the last-level cache of every known accelerator" in array_note(size, accelerator=True)
    assert "may be served from a cache" in array_note(512 << 20, accelerator=True)


# --- 10: Keras tf32 is gated as the native frameworks' is ---------------------------------------------

def test_keras_tf32_runs_only_where_tf32_exists(monkeypatch):
    from xpubench.backends import keras_
    from xpubench.backends.jax_ import device

    monkeypatch.setattr(device, "jax_devices", lambda *a: [fake_jax_device("tpu", "TPU v5 lite", None)])
    tpu = Case(workload="mnist_cnn", backend="keras:jax", device="tpu:0", mode="train", precision="tf32",
               batch_size=256)
    assert "not of a tpu device" in keras_.BACKEND.unsupported(tpu)     # Keras's "tensorfloat32" = 3 bf16 passes
    monkeypatch.setattr(device, "jax_devices", lambda *a: [fake_jax_device("gpu", "AMD Instinct MI300X", "gfx942")])
    assert "not on amd GPUs" in keras_.BACKEND.unsupported(dataclasses.replace(tpu, device="gpu:0"))
    monkeypatch.setattr(device, "jax_devices", lambda *a: [fake_jax_device()])
    assert keras_.BACKEND.unsupported(dataclasses.replace(tpu, device="gpu:0")) is None     # an H100: it applies
    cpu = Case(workload="mnist_cnn", backend="keras:torch", device="cpu", mode="train", precision="tf32",
               batch_size=256)
    assert "not of a cpu device" in keras_.BACKEND.unsupported(cpu)


# --- 11: brief accelerator epochs long enough for the host to run ahead ----------------------------------

class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class AsyncDevice:
    """A step Trainer on a fake asynchronous device: each step costs the host ``launch_s`` to dispatch,
    the device ``device_s`` to run once dispatched (in order), and a sync returns ``sync_s`` after the
    device is done."""

    global_batch = 32

    def __init__(self, clock, steps, launch_s, device_s, sync_s):
        self.clock, self.steps_per_epoch = clock, steps
        self.launch_s, self.device_s, self.sync_s = launch_s, device_s, sync_s
        self.free = 0.0

    def step(self, i):
        self.clock.now += self.launch_s
        self.free = max(self.clock.now, self.free) + self.device_s
        return self.free

    def sync(self, handle):
        self.clock.now = max(self.clock.now, self.free) + self.sync_s

    compile = peak_memory = lambda self: None

    def start_epoch(self, epoch):
        pass

    def loss_value(self, handle):
        return 1.0

    def evaluate(self):
        return 1.0, 0.5

    def placement(self):
        return "gpu:0"


def step_error(steps: int, launch_s=1e-3, device_s=1e-3, sync_s=0.2e-3) -> float:
    """Relative error of the harness's steady step time against the device's own, on the fake device."""
    from xpubench.harness.training import run_training

    clock = FakeClock()
    case = Case(workload="mnist_cnn", backend="fake", device="gpu:0", mode="train", batch_size=256, epochs=3,
                steps=steps)
    outcome = run_training(AsyncDevice(clock, steps, launch_s, device_s, sync_s), case, 1.0, clock=clock)
    return outcome.metrics["step_s"] / device_s - 1


def test_brief_accelerator_epochs_have_enough_steps_for_the_host_to_run_ahead():
    from xpubench.plan.defaults import QUICK_ACCEL_STEPS, QUICK_CPU_STEPS

    assert step_error(2) > 0.6                          # the old brief run: first dispatch + final sync dominate
    assert step_error(QUICK_ACCEL_STEPS) <= 0.05        # a dispatch as long as a device step, a fifth-step sync
    assert step_error(QUICK_ACCEL_STEPS, launch_s=0.2e-3) <= 0.02
    cases = build_cases(PlanRequest(devices=["gpu", "cpu"], workloads=["mnist_cnn"], quick=True), machine("h100-sxm"))
    assert {c.device: c.steps for c in cases} == {"gpu:0": QUICK_ACCEL_STEPS, "cpu": QUICK_CPU_STEPS}


# --- 12: Apple M1/M2: fp16, not their emulated bf16 ------------------------------------------------------

def test_the_m2s_16_bit_training_is_fp16_or_a_stated_note(monkeypatch):
    import torch

    from xpubench.backends import torch_

    m2 = machine("apple-m2")                            # torch 2.4.1: its GradScaler does not run on MPS
    cases = build_cases(PlanRequest(devices=["mps"], quick=True), m2)
    assert {c.precision for c in cases if c.mode == "train"} == {"fp32"}
    notes = plan_notes(PlanRequest(), m2, cases, environ={})
    assert any("bf16 is emulated on the Apple M2 GPU" in n and "torch >= 2.8" in n for n in notes)
    newer = copy.deepcopy(m2)
    newer["backends"]["torch"]["version"] = "2.8.0"
    cases = build_cases(PlanRequest(devices=["mps"], quick=True), newer)
    assert {c.precision for c in cases if c.mode == "train"} == {"fp32", "fp16"}
    assert any("training precision here is fp16" in n for n in plan_notes(PlanRequest(), newer, cases, environ={}))
    for dev in newer["backends"]["torch"]["devices"]:
        dev["name"] = dev["name"].replace("M2", "M3") if dev["kind"] == "mps" else dev["name"]
    assert {c.precision for c in build_cases(PlanRequest(devices=["mps"], quick=True), newer)
            if c.mode == "train"} == {"fp32", "bf16"}
    monkeypatch.setattr(torch, "__version__", "2.4.1")
    fp16 = Case(workload="mnist_cnn", backend="torch", device="mps", mode="train", precision="fp16", batch_size=256)
    assert "needs torch >= 2.8" in torch_.BACKEND.unsupported(fp16)
