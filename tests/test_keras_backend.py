"""The keras backend: the built-in workloads as Keras models with the native parameter counts, trained
with Keras's own fit and predicted with predict_on_batch on Keras's jax and torch backends, measured by
the harness's timer (compile apart, steady steps, budget).

Keras picks its backend at import, so each Keras backend's cases and checks run in one worker process of
their own (tests/batch_worker.py: each case as launch/worker.py runs it; RUNS below), each made once per
module and read by every test that asks: a process start and a Keras import per group, not per case."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
from batch_worker import ONE_THREAD, run_cases
from quick_compile import QUICK_XLA

from xpubench.case import Case
from xpubench.workloads import imdb_lstm, names, shakespeare_lstm

LSTM_LAYERS = {"imdb_lstm": 1, "shakespeare_lstm": 2}   # Keras's LSTM has one bias vector, torch's two
HIDDEN = {"imdb_lstm": imdb_lstm.HIDDEN, "shakespeare_lstm": shakespeare_lstm.HIDDEN}


def parity_counts(keras_backend: str) -> dict:
    """Each built-in model's trainable parameters: [Keras on ``keras_backend``, torch, flax]; run in the
    Keras backend's worker process (batch_worker)."""
    import jax
    import torch  # noqa: F401  (the torch models)

    from xpubench.backends.jax_.model import init_variables
    from xpubench.backends.keras_.device import import_keras
    from xpubench.workloads import get_workload

    keras = import_keras(keras_backend)
    from keras.src.backend.common import global_state

    out = {}
    for name in names("model"):
        wl = get_workload(name)
        spec = wl.spec
        # built in a stateless scope: the variables get their shapes, their initializers never run (on jax
        # each initializer's random draw compiles one XLA program per weight shape: ~10 s of CPU for the six)
        with keras.StatelessScope(initialize_variables=False):
            k = sum(int(np.prod(v.shape)) for v in wl.models["keras"](spec).trainable_weights)
        global_state.set_global_attribute("uninitialized_variables", [])   # and never will, in a later scope
        t = sum(p.numel() for p in wl.models["torch"](spec).parameters())
        x = np.zeros((1, *spec.input_shape), np.int32 if spec.input_kind == "tokens" else np.float32)
        # the shapes init would give, traced without running it (a real init compiles each model: ~1 min)
        params, _ = jax.eval_shape(lambda wl=wl, spec=spec, x=x: init_variables(wl.models["jax"](spec), spec, x, 0))
        f = sum(int(np.prod(a.shape)) for a in jax.tree.leaves(params))
        out[name] = [k, t, f]
    return out


def compile_undone() -> list:
    """[whether KerasTrainer.compile left every model and optimizer variable as it found them, how many]."""
    from xpubench.backends.keras_.train import KerasTrainer

    case = Case(workload="mnist_cnn", backend="keras:jax", device="cpu", mode="train", batch_size=32,
                train_samples=64, eval_samples=32)
    t = KerasTrainer(case)
    before = [v.numpy().copy() for v in [*t.model.variables, *t.model.optimizer.variables]]
    assert t.compile() > 0
    after = [v.numpy() for v in [*t.model.variables, *t.model.optimizer.variables]]
    # the variables there before (the optimizer builds its slots in compile: those come after them)
    return [all(np.array_equal(a, b) for a, b in zip(before, after[:len(before)], strict=True)), len(before)]


def _case(backend, mode="train", workload="mnist_cnn", **kw):
    fields = {"batch_size": 64, "epochs": 3, "steps": 5, "train_samples": 512, "eval_samples": 100, **kw}
    fields["options"] = {"weights_dir": "off", **kw.get("options", {})}
    return Case(workload=workload, backend=backend, device="cpu", mode=mode, **fields)


def _infer(keras_backend, precision):
    """An inference case whose trained weights are cached in the module's folder (keras_runs sets
    XPUBENCH_WEIGHTS_DIR): the cases of one Keras backend that differ only in precision train once, the
    later one loads what the first trained, into a model built after others in the same process."""
    case = _case(f"keras:{keras_backend}", "infer", precision=precision, epochs=1, time_budget_s=1)
    return dataclasses.replace(case, options={})


def _matmul(keras_backend):
    return Case(workload="matmul", backend=f"keras:{keras_backend}", device="cpu", mode="matmul", size=256,
                time_budget_s=0.5)


# what each worker process runs, by name: the cases and checks of every test below. The training cases
# run batches of 16 (what they check does not depend on the batch; a conv step costs a quarter of 64's).
# On JAX every case and check runs in one process with XLA's unoptimised backend (tests/quick_compile.py:
# the same programs and results, 4-5x less CPU to compile; Keras on JAX also compiles each initializer's
# random draw, one XLA program per weight shape). The fit test's "compile_s > 5 first steps" holds there
# with margin (compile 26 s against a first step of 0.9 s, at load 20), and bf16 inference of 100 images
# takes 10 s of CPU in all, half what it took optimised (its compile is most of it). Every process runs one
# CPU thread per kernel library (conftest's one_thread_workers): the tests check what is recorded, not how
# fast
RUNS = {
    "jax unoptimised": {"fit": _case("keras:jax", batch_size=16), "infer_bf16": _infer("jax", "bf16"),
                        "parity": ("test_keras_backend:parity_counts", "jax"),
                        "compile_undone": ("test_keras_backend:compile_undone",),
                        "epoch_sync": _case("keras:jax", epochs=2, steps=8, batch_size=16,
                                            options={"sync": "epoch"}),
                        "budget_cut": _case("keras:jax", epochs=3, steps=8, batch_size=16, time_budget_s=0.001,
                                            options={"sync": "step"}),
                        "infer_fp32": _infer("jax", "fp32"), "matmul": _matmul("jax")},
    "torch": {"parity": ("test_keras_backend:parity_counts", "torch"),
              "fit": _case("keras:torch", batch_size=16),
              "infer_int8": _infer("torch", "int8"),
              "matmul": _matmul("torch")},
}


@pytest.fixture(scope="module")
def keras_runs(tmp_path_factory):
    """keras_runs(keras_backend, name): what RUNS[process][name] gave in the process of ``keras_backend``
    holding it, all of that process's made at its first use (the inference cases' weights cache, and the
    JAX process's compilation cache, in folders of the module's)."""
    weights = tmp_path_factory.mktemp("keras-weights")
    done: dict[str, dict] = {}
    failed: dict[str, BaseException] = {}   # a process that failed fails every test that asks it, once

    def runs(keras_backend: str, name: str):
        process = next(p for p, items in RUNS.items() if p.split()[0] == keras_backend and name in items)
        if process in failed:
            raise failed[process]
        if process not in done:
            items = RUNS[process]
            env = {**ONE_THREAD, "XPUBENCH_WEIGHTS_DIR": str(weights)}
            if process.endswith("unoptimised"):
                env["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {QUICK_XLA}"
                # JAX's persistent compilation cache, empty at the start: a program compiled by an earlier
                # case of the process (the same model's training step at the same batch, the fp32 predict
                # function) is read back instead of compiled again. The fit case comes first, so the
                # compile its test measures is a real one
                env["JAX_COMPILATION_CACHE_DIR"] = str(tmp_path_factory.mktemp("keras-xla-cache"))
                env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
            try:
                done[process] = dict(zip(items, run_cases(list(items.values()), timeout_s=1200, env=env),
                                         strict=True))
            except BaseException as exc:
                failed[process] = exc
                raise
        return done[process][name]

    return runs


@pytest.mark.slow
@pytest.mark.parametrize("keras_backend", ["jax", "torch"])
def test_keras_models_have_the_native_parameter_counts(keras_backend, keras_runs):
    counts = keras_runs(keras_backend, "parity")
    assert set(counts) == set(names("model"))
    for name, (keras_n, torch_n, flax_n) in counts.items():
        assert torch_n == flax_n
        hidden = HIDDEN.get(name, 0)
        assert keras_n == torch_n - 4 * hidden * LSTM_LAYERS.get(name, 0), name
    assert counts["mnist_cnn"][0] == 412_778 and counts["cifar10_resnet"][0] == 269_722
    assert counts["weather_gru"][0] == 821_763


@pytest.mark.slow
@pytest.mark.parametrize("keras_backend", ["jax", "torch"])
def test_fit_is_timed_step_by_step_with_compile_and_the_first_epoch_apart(keras_backend, keras_runs):
    outcome = keras_runs(keras_backend, "fit")
    m, s = outcome["metrics"], outcome["samples"]
    assert outcome["status"] == "ok", outcome["message"]
    assert m["keras_backend"] == keras_backend and m["epochs_run"] == 3 and m["steps_per_epoch"] == 5
    assert len(s["first_epoch_step_s"]) == 5 and len(s["step_s"]) == 10 and len(s["epoch_s"]) == 3
    assert m["first_epoch_s"] >= sum(s["first_epoch_step_s"]) and m["epoch_s"] > 0
    assert m["flops_per_sample"] == 3 * 4_420_608 and m["matmul_precision"] == "highest"
    if keras_backend == "jax":   # compiled apart: the first fit step reuses the compiled function
        assert m["compiled"] and m["compile_s"] > 5 * m["first_step_s"]
    else:
        assert not m["compiled"] and m["compile_s"] is None
    assert 0.0 <= m["final_metric"] <= 1.0 and np.isfinite(m["final_val_loss"])


@pytest.mark.slow
def test_a_pipelined_epoch_and_a_budget_cut(keras_runs):
    outcome = keras_runs("jax", "epoch_sync")
    m, s = outcome["metrics"], outcome["samples"]
    assert outcome["status"] == "ok" and m["sync"] == "epoch" and len(s["step_s"]) == 1   # one sample per epoch
    m = keras_runs("jax", "budget_cut")["metrics"]
    assert m["budget_hit"] and m["budget_cut_steps"] == 4 and m["epochs_run"] == 0   # the first step + 3


@pytest.mark.slow
@pytest.mark.parametrize("keras_backend, precision", [("jax", "fp32"), ("jax", "bf16"), ("torch", "int8")])
def test_predict_on_batch_inference(keras_backend, precision, keras_runs):
    outcome = keras_runs(keras_backend, f"infer_{precision}")
    m = outcome["metrics"]
    assert outcome["status"] == "ok", outcome["message"]
    assert m["predictions"] == 100 and m["latency_s"] > 0 and m["keras_backend"] == keras_backend
    if precision != "fp32":
        assert m["size_ratio"] < 0.6 and "fp32_accuracy" in m
    if keras_backend == "jax":   # fp32 and bf16 from the same training: one trained, the other loaded it
        other = keras_runs("jax", f"infer_{'bf16' if precision == 'fp32' else 'fp32'}")["metrics"]
        assert m["weights_sha256"] == other["weights_sha256"]
        assert {m["weights_source"], other["weights_source"]} == {"trained", "cache"}


@pytest.mark.slow
@pytest.mark.parametrize("keras_backend", ["jax", "torch"])
def test_keras_ops_matmul(keras_backend, keras_runs):
    outcome = keras_runs(keras_backend, "matmul")
    assert outcome["status"] == "ok" and outcome["metrics"]["max_rel_error"] < 1e-4


@pytest.mark.slow
def test_the_timed_compile_step_is_undone(keras_runs):
    undone, count = keras_runs("jax", "compile_undone")
    assert undone is True and count > 10


def test_cached_weights_load_into_a_model_whose_layers_keras_numbered_differently():
    """A weights cache written where the model was the process's first (``conv2d_2``) loads into the same model
    built after others (``conv2d_33``): Keras's layer numbers are not part of a variable's identity; its position,
    its layer's kind and its name are."""
    from xpubench.backends.keras_.infer import same_variable

    assert same_variable("0:mnist_cnn/conv2d_2/kernel", 0, "mnist_cnn_1/conv2d_33/kernel")
    assert same_variable("5:sequential/dense/bias", 5, "sequential/dense/bias")
    assert not same_variable("0:mnist_cnn/conv2d_2/kernel", 1, "mnist_cnn/conv2d_2/kernel")   # another position
    assert not same_variable("0:mnist_cnn/conv2d_2/kernel", 0, "mnist_cnn/dense_2/kernel")    # another layer
    assert not same_variable("0:mnist_cnn/conv2d/kernel", 0, "mnist_cnn/conv2d/bias")         # another variable
