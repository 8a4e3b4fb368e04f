"""The inference measurement, the same for every framework and precision.

A Predictor holds a model already converted to the case's precision and the evaluation inputs already
on the device, cut into ``batches`` batches of ``batch`` rows; the last one is padded with zero rows,
so any number of samples works. Pad rows are computed (every call has the same shape: no recompile,
no new kernel selection) but their outputs are dropped before scoring and never counted as samples.

Timed regions (see docs/methodology.md, "Inference"):
- ``compile_s``: ahead-of-time compilation of the predict function (jax.jit lower+compile); None for
  eager PyTorch.
- ``first_call_s``: the first prediction of batch 0 until its output is ready (kernel selection,
  allocator growth, lazy initialisation; torch.compile would compile here).
- ``latency_s`` (samples): after 2 untimed warm-up calls, one batch per call, each call timed from the
  call until its output is ready (a synchronised single call: what one request waits).
- ``pass_s`` (samples): prediction of all ``n`` samples, every batch dispatched back to back, then
  waiting for all outputs (asynchronous frameworks may overlap batches, as a serving loop would).
  ``samples_per_s`` = n / median pass (pad rows excluded from n, included in the work).
Outputs stay on the device inside the clock; they are copied to the host after it, for scoring.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from xpubench.energy.meter import Unavailable
from xpubench.energy.windows import EnergyWindows, meter_for_case
from xpubench.results.metrics_infer import InferMetrics
from xpubench.results.stats import summarize

DEFAULT_BUDGET_S = 10.0     # measurement time after the first call, when the case gives no budget
WARMUP_CALLS = 2
LATENCY_CALLS = (5, 50)     # at least, at most
PASSES = (1, 5)             # at least, at most (3 wanted for a spread)


class NotApplicable(Exception):
    """This precision does not apply to this model or device: the case is recorded as skipped."""


class Predictor(Protocol):
    n: int                                   # samples to predict
    batch: int                               # rows per call (the last batch padded to it)

    def compile(self) -> float | None: ...   # seconds of AOT compile, or None
    def predict(self, i: int) -> Any: ...    # batch i -> output handle on the device
    def sync(self, handle: Any) -> None: ... # wait until that output exists
    def host(self, handle: Any) -> np.ndarray: ...  # a batch's outputs as float32 numpy (pad rows too)
    def model_bytes(self) -> int: ...        # bytes of the weights as held for inference
    def placement(self) -> str: ...          # where an output of predict() lives
    def peak_memory(self) -> int | None: ... # highest memory in use since reset_peak_memory() (optional)


def batch_count(n: int, batch: int) -> int:
    if n < 1 or batch < 1:
        raise ValueError(f"nothing to predict: {n} samples, batch {batch}")
    return math.ceil(n / batch)


def pad_rows(a: np.ndarray, rows: int) -> np.ndarray:
    """``a`` with zero rows appended up to ``rows`` (a no-op when it has them)."""
    if len(a) >= rows:
        return a
    return np.concatenate([a, np.zeros((rows - len(a), *a.shape[1:]), dtype=a.dtype)])


def predict_all(predictor: Predictor) -> np.ndarray:
    """Untimed: the outputs for exactly ``predictor.n`` samples, in order, pad rows dropped."""
    handles = [predictor.predict(i) for i in range(batch_count(predictor.n, predictor.batch))]
    return collect(predictor, handles)


def collect(predictor: Predictor, handles: list) -> np.ndarray:
    out = np.concatenate([predictor.host(h) for h in handles])[:predictor.n]
    if len(out) != predictor.n:
        raise AssertionError(f"{len(out)} predictions for {predictor.n} samples")
    return out


def score(spec, out: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(mean loss, mean metric) over the samples, as the trainers' evaluate() computes them."""
    out, n = np.asarray(out, dtype=np.float64), len(y)
    if spec.loss == "softmax_ce":
        logits = out.reshape(-1, out.shape[-1])
        labels = np.asarray(y).reshape(-1).astype(np.int64)
        shifted = logits - logits.max(-1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        ce = -logp[np.arange(len(labels)), labels]
        correct = (logits.argmax(-1) == labels).astype(np.float64)
        return float(ce.mean()), float(correct.reshape(n, -1).mean(1).mean())
    if spec.loss == "sigmoid_bce":
        z, t = out.reshape(np.shape(y)), np.asarray(y, dtype=np.float64)
        bce = np.maximum(z, 0) - z * t + np.log1p(np.exp(-np.abs(z)))
        return float(bce.mean()), float(((z > 0) == (t > 0.5)).mean())
    err = ((out - np.asarray(y, dtype=np.float64)) ** 2).reshape(n, -1).mean(1)
    return float(err.mean()), float(err.mean())


def measure(predictor: Predictor, budget_s: float | None = None,
            clock: Callable[[], float] = time.perf_counter, energy=None) -> tuple[dict, dict, np.ndarray]:
    """Run the timed regions; returns (metrics, raw samples, outputs of the last pass on the host).
    ``energy`` (energy/windows.py EnergyWindows): read around each timed pass."""
    energy = energy or EnergyWindows(Unavailable("no energy meter was given"))
    budget = budget_s or DEFAULT_BUDGET_S
    nb = batch_count(predictor.n, predictor.batch)
    compile_s = predictor.compile()
    reset = getattr(predictor, "reset_peak_memory", None)
    if reset:
        reset()   # peak memory of inference only: the untimed training and conversion before are not in it
    t0 = clock()
    predictor.sync(predictor.predict(0))
    first_call_s = clock() - t0
    for i in range(WARMUP_CALLS):
        predictor.sync(predictor.predict(i % nb))
    begin = clock()
    latency: list[float] = []
    while len(latency) < LATENCY_CALLS[1]:
        if len(latency) >= LATENCY_CALLS[0] and clock() - begin > 0.4 * budget:
            break
        i = len(latency) % nb
        t0 = clock()
        predictor.sync(predictor.predict(i))
        latency.append(clock() - t0)
    passes: list[float] = []
    handles: list = []
    while len(passes) < PASSES[1]:
        if len(passes) >= PASSES[0] and (clock() - begin > budget or len(passes) >= 3
                                         and clock() - begin > 0.5 * budget):
            break
        with energy.window():
            t0 = clock()
            handles = [predictor.predict(i) for i in range(nb)]
            for h in handles:
                predictor.sync(h)
            passes.append(clock() - t0)
    outputs = collect(predictor, handles)
    lat, pas = summarize(latency), summarize(passes)
    warning = "; ".join(w for w in (lat.warning and f"latency: {lat.warning}",
                                    pas.warning and f"pass: {pas.warning}") if w) or None
    metrics = InferMetrics(
        compile_s=compile_s, first_call_s=first_call_s, batch=predictor.batch, eval_samples=predictor.n,
        batches=nb, pad_rows=nb * predictor.batch - predictor.n, predictions=len(outputs), latency_s=lat.median,
        latency_p90_s=lat.p90, latency_iqr_s=lat.iqr, latency_cv=lat.cv, latency_ci95_low_s=lat.ci95_low,
        latency_ci95_high_s=lat.ci95_high, us_per_sample=lat.median / predictor.batch * 1e6,
        batch_samples_per_s=predictor.batch / lat.median, pass_s=pas.median, passes=len(passes),
        samples_per_s=predictor.n / pas.median, model_bytes=predictor.model_bytes(),
        peak_memory_bytes=predictor.peak_memory(), warning=warning,
    ).as_dict() | energy.figures(steps=nb * len(passes), samples=predictor.n * len(passes))
    return metrics, {"latency_s": latency, "pass_s": passes}, outputs


def quality(spec, outputs: np.ndarray, y: np.ndarray, prefix: str = "") -> dict:
    """{"loss", "<metric>"} (e.g. "accuracy" or "mse") of outputs against y, names prefixed."""
    loss, metric = score(spec, outputs, y)
    return {f"{prefix}loss": loss, f"{prefix}{spec.metric}": metric}


def compare_to_fp32(spec, metrics: dict, reference: dict, fp32_bytes: int) -> None:
    """Adds the fp32 figures of the same weights and the deltas (this precision minus fp32) in place."""
    metrics.update(reference)
    metrics["fp32_model_bytes"] = fp32_bytes
    metrics["size_ratio"] = metrics["model_bytes"] / fp32_bytes if fp32_bytes else None
    for name in ("loss", spec.metric):
        metrics[f"{name}_delta"] = metrics[name] - reference[f"fp32_{name}"]


def train_untimed(trainer, case) -> None:
    """The fp32 training an inference case starts from: ``case.epochs`` epochs of ``case.steps`` steps
    (capped at the epoch), the trainers' own steps and batch order, no evaluation. Not measured."""
    steps = min(case.steps or trainer.steps_per_epoch, trainer.steps_per_epoch)
    if steps < 1:
        raise ValueError(f"the training set holds less than one batch ({trainer.global_batch})")
    trainer.compile()
    for epoch in range(case.epochs or 1):
        trainer.start_epoch(epoch)
        handle = None
        for i in range(steps):
            handle = trainer.step(i)
        trainer.sync(handle)


MIN_INT8_SHARE = 0.5   # int8 is skipped where the layers it covers hold less than this share of the weights


def check_int8_share(report: dict, workload: str) -> None:
    share = report["int8_param_fraction"]
    if share < MIN_INT8_SHARE:
        raise NotApplicable(
            f"int8 covers only {share:.1%} of {workload}'s parameters (layers {', '.join(report['int8']) or 'none'}); "
            f"its {', '.join(report['fp32'][:3])}{'...' if len(report['fp32']) > 3 else ''} stay fp32")


class Session(Protocol):
    """What a backend supplies to ``run_inference``: a trained-or-loaded model and its converters."""

    spec: Any
    forward_flops: float
    y_eval: np.ndarray

    def precheck(self, precision: str) -> None: ...        # raise NotApplicable before any training
    def key_extra(self) -> dict: ...                       # framework version, code and data digests
    def train(self) -> dict[str, np.ndarray]: ...          # train (untimed) and return the weights
    def load(self, arrays: dict[str, np.ndarray]) -> None: ...
    def predictor(self, precision: str) -> tuple[Predictor, dict]: ...  # (predictor, conversion report)


def run_inference(case, session: Session, gpu_identity=None):
    """An inference case: the fp32 weights of the case's training run (trained here, or the cached
    result of that same run), converted to the case's precision, then measured (see module docstring).
    Non-fp32 cases also score the fp32 model on the same samples, so before/after is in one record."""
    import dataclasses

    from xpubench.harness import weights
    from xpubench.results.outcome import Outcome

    if case.devices != 1 and not getattr(session, "data_parallel", False):
        raise ValueError("this inference path runs one device; data-parallel inference has its own")
    try:
        session.precheck(case.precision)
    except NotApplicable as exc:
        return Outcome(status="skipped", message=f"{case.precision}: {exc}")
    train_case = dataclasses.replace(case, mode="train", precision="fp32")
    arrays, info = weights.trained_weights(train_case, session.key_extra(), session.train,
                                           {"workload": case.workload, "backend": case.backend})
    if info["weights_source"] == "cache":
        session.load(arrays)
    spec = session.spec
    reference, fp32_bytes = {}, None
    if case.precision != "fp32":
        fp32, _ = session.predictor("fp32")
        reference = quality(spec, predict_all(fp32), session.y_eval, prefix="fp32_")
        fp32_bytes = fp32.model_bytes()
    predictor, report = session.predictor(case.precision)
    metrics, samples, outputs = measure(predictor, case.time_budget_s,
                                        energy=EnergyWindows(meter_for_case(case, gpu_identity)))
    metrics.update(quality(spec, outputs, session.y_eval))
    if reference:
        compare_to_fp32(spec, metrics, reference, fp32_bytes)
    metrics.update(info)
    metrics.update({
        "metric_name": spec.metric,
        "train_epochs": case.epochs or 1,
        "train_steps": case.steps,
        "flops_per_sample": session.forward_flops,
        "forward_flops_per_sample": session.forward_flops,
        "achieved_flops_per_s": session.forward_flops * metrics["samples_per_s"],
        "int8_layers": ", ".join(report["int8"]) if "int8" in report else None,
        "fp32_layers": ", ".join(report["fp32"]) if "fp32" in report else None,
        "int8_param_fraction": report.get("int8_param_fraction"),
        "quantization": report.get("method"),
    })
    return Outcome(metrics=metrics, samples=samples, placement=predictor.placement())
