"""Inference: any sample count (padded and masked), the timed regions, scoring, end-to-end cases."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from quick_compile import quick_xla_in_process  # noqa: F401  (the fixture, used by name)

from xpubench.case import Case
from xpubench.harness import inference
from xpubench.harness.inference import batch_count, measure, pad_rows, predict_all, score
from xpubench.workloads import get_workload

N, BATCH = 1001, 64


class FakePredictor:
    """Outputs row index + 0.5 for each row; counts the calls and advances a fake clock per call."""

    def __init__(self, n, batch, clock):
        self.n, self.batch, self.clock, self.calls = n, batch, clock, []

    def compile(self):
        return 1.5

    def predict(self, i):
        self.calls.append(i)
        self.clock.t += 0.5 if len(self.calls) == 1 else 0.01  # the first call is slow
        start = i * self.batch
        return np.arange(start, start + self.batch, dtype=np.float32)[:, None] + 0.5

    def sync(self, handle):
        pass

    def host(self, handle):
        return handle

    def model_bytes(self):
        return 123

    def placement(self):
        return "cpu"

    def peak_memory(self):
        return None


class Clock:
    t = 0.0

    def __call__(self):
        return self.t


def test_measure_regions_and_counts() -> None:
    clock = Clock()
    p = FakePredictor(N, BATCH, clock)
    metrics, samples, outputs = measure(p, budget_s=2.0, clock=clock)
    assert batch_count(N, BATCH) == 16 and metrics["pad_rows"] == 16 * 64 - N == 23
    assert metrics["compile_s"] == 1.5 and metrics["first_call_s"] == pytest.approx(0.5)
    assert metrics["predictions"] == N and outputs.shape == (N, 1)
    np.testing.assert_array_equal(outputs[:, 0], np.arange(N) + 0.5)   # in order, pad rows dropped
    assert 5 <= len(samples["latency_s"]) <= 50 and all(s == pytest.approx(0.01) for s in samples["latency_s"])
    assert 1 <= len(samples["pass_s"]) <= 5
    assert metrics["samples_per_s"] == pytest.approx(N / (16 * 0.01))  # pad rows not counted as samples
    assert metrics["latency_s"] == pytest.approx(0.01) and metrics["model_bytes"] == 123


def test_pad_rows_and_score() -> None:
    a = np.ones((3, 2), np.float32)
    assert pad_rows(a, 5).shape == (5, 2) and pad_rows(a, 5)[3:].sum() == 0 and pad_rows(a, 3) is a
    spec = get_workload("imdb_lstm").spec
    loss, acc = score(spec, np.array([[2.0], [-1.0], [0.5]]), np.array([1.0, 1.0, 0.0]))
    assert acc == pytest.approx(1 / 3)
    expected = np.mean([np.log1p(np.exp(-2.0)), np.log1p(np.exp(1.0)), np.log1p(np.exp(0.5))])
    assert loss == pytest.approx(expected)
    spec = get_workload("mnist_cnn").spec
    logits = np.array([[0.0, 1.0], [3.0, 0.0]])
    loss, acc = score(spec, logits, np.array([1, 1]))
    assert acc == 0.5 and loss == pytest.approx((np.log(1 + np.e ** -1) + np.log(np.e ** 3 + 1)) / 2)


def _tokens(spec, n):
    return np.random.default_rng(0).integers(0, spec.vocab_size, (n, *spec.input_shape)).astype(np.int32)


@pytest.mark.slow
def test_torch_any_sample_count() -> None:
    torch = pytest.importorskip("torch")
    from xpubench.backends.torch_.infer import TorchPredictor

    wl = get_workload("imdb_lstm")
    spec = dataclasses.replace(wl.spec, input_shape=(12,))
    torch.manual_seed(0)
    model = wl.models["torch"](spec)
    x = torch.from_numpy(_tokens(spec, N))
    outs = [predict_all(TorchPredictor(model, x, b, torch.device("cpu"))) for b in (BATCH, 100, N)]
    assert all(o.shape == (N, 1) for o in outs)
    np.testing.assert_allclose(outs[0], outs[2], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[1], outs[2], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.usefixtures("quick_xla_in_process")
def test_jax_any_sample_count() -> None:
    jax = pytest.importorskip("jax")
    from xpubench.backends.jax_.infer import JaxPredictor

    wl = get_workload("imdb_lstm")
    spec = dataclasses.replace(wl.spec, input_shape=(12,))
    model = wl.models["jax"](spec)
    x = _tokens(spec, N)
    params = jax.jit(model.init)(jax.random.key(0), x[:1])["params"]   # one program, not one per op

    def fn(p, e, xb):
        return model.apply({"params": p}, xb)

    outs = [predict_all(JaxPredictor(fn, params, {}, x, b, jax.devices("cpu")[0])) for b in (BATCH, N)]
    assert all(o.shape == (N, 1) for o in outs)
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)


def _case(backend, precision="fp32", **kw):
    base = {"workload": "mnist_cnn", "backend": backend, "device": "cpu", "mode": "infer",
            "precision": precision, "batch_size": 32, "epochs": 1, "steps": 2, "train_samples": 64,
            "eval_samples": 101, "time_budget_s": 0.2}   # the timed regions' least counts, whatever the budget
    return Case(**{**base, **kw})


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_infer_case_end_to_end(backend, tmp_path, request) -> None:
    """fp32 then bf16 on the same (cached) weights; the score equals the trainer's own evaluation. JAX's programs
    compile with quick_xla_in_process (tests/quick_compile.py): the test is about what is recorded, not speed."""
    pytest.importorskip(backend)
    if backend == "jax":
        request.getfixturevalue("quick_xla_in_process")
    from xpubench.launch.dispatch import run_case

    opts = {"weights_dir": str(tmp_path)}
    fp32 = run_case(_case(backend, options=opts))
    assert fp32.status == "ok", fp32.message
    m = fp32.metrics
    assert m["predictions"] == m["eval_samples"] == 101 and m["pad_rows"] == 27 and m["batches"] == 4
    assert m["weights_source"] == "trained" and m["model_bytes"] == 412_778 * 4
    assert len(fp32.samples["latency_s"]) >= 5 and fp32.samples["pass_s"]
    assert 0 <= m["accuracy"] <= 1 and m["samples_per_s"] > 0 and m["first_call_s"] > 0
    bf16 = run_case(_case(backend, "bf16", options=opts))
    assert bf16.status == "ok", bf16.message
    b = bf16.metrics
    assert b["weights_source"] == "cache" and b["weights_sha256"] == m["weights_sha256"]
    assert b["fp32_accuracy"] == pytest.approx(m["accuracy"]) and b["size_ratio"] == pytest.approx(0.5)
    assert abs(b["accuracy_delta"]) <= 0.05


@pytest.mark.slow   # ~2 s: a model trained and scored
def test_score_matches_trainer_evaluate() -> None:
    pytest.importorskip("torch")
    from xpubench.backends.torch_.infer import TorchSession

    session = TorchSession(_case("torch", eval_samples=77))
    _, acc_eval = session.trainer.evaluate()
    predictor, _ = session.predictor("fp32")
    loss, acc = score(session.spec, predict_all(predictor), session.y_eval)
    assert acc == pytest.approx(acc_eval) and loss == pytest.approx(session.trainer.evaluate()[0], rel=1e-5)


def test_data_parallel_is_not_this_path() -> None:
    with pytest.raises(ValueError, match="one device"):
        inference.run_inference(_case("torch", devices=2), session=_NoSession())


class _NoSession:
    def precheck(self, precision):
        pass


def test_plan_int8_makes_an_inference_comparison() -> None:
    from xpubench.plan import PlanRequest, build_cases

    env = {"backends": {"torch": {"installed": True, "devices": [{"id": "cpu", "kind": "cpu"}]}}}
    cases = build_cases(PlanRequest(workloads=["imdb_lstm"], backends=["torch"],
                                    precisions=["fp32", "bf16", "int8"]), env)
    assert [(c.precision, c.mode) for c in cases] == [("fp32", "infer"), ("bf16", "infer"), ("int8", "infer")]
    cases = build_cases(PlanRequest(workloads=["imdb_lstm"], backends=["torch"], precisions=["fp32", "int8"],
                                    modes=["train"]), env)
    assert [(c.precision, c.mode) for c in cases] == [("fp32", "train"), ("int8", "infer")]
