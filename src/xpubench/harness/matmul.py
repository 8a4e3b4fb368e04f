"""The matmul measurement, the same for every backend: N x N products, the seeds' "simple benchmarking"
test done properly.

FLOPs per product: 2 N^3 (N^3 multiply-adds). *Cold* is the first call on fresh inputs: it includes
compilation (jax.jit), library and kernel warm-up (BLAS thread pool, cuBLAS handle and heuristics).
*Warm* is the steady state: calibrated windows of back-to-back products, synchronised at the end of
each window (harness.timing.time_windows). The result of one product is checked against float64 numpy
on a few rows, so a wrong kernel can't report a fast time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from xpubench.harness.timing import time_windows, timed
from xpubench.results.metrics_matmul import MatmulMetrics
from xpubench.results.outcome import Outcome
from xpubench.results.stats import summarize
from xpubench.workloads.matmul import flops

DEFAULT_BUDGET_S = 6.0      # measured time per case; the sample count is cut (and flagged) beyond it
CHECK_ROWS = 8


@dataclass
class MatmulOps:
    """What a backend supplies; the measurement itself is the same for every backend."""

    make_inputs: Callable[[int], tuple[Any, Any]]   # n -> (a, b), on the device, ready
    product: Callable[[Any, Any], Any]              # one product (already compiled or not)
    sync: Callable[[Any], None]                     # wait for the device work behind a result
    to_numpy: Callable[[Any], np.ndarray]           # host copy of (part of) a result, as float64
    placement: Callable[[Any], str]                 # device that holds a result
    tolerance: float                                # relative error allowed for the precision


def inputs_numpy(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32))


def measure(ops: MatmulOps, case) -> Outcome:
    n = case.size
    a, b = ops.make_inputs(n)
    holder: dict[str, Any] = {}

    def once():
        holder["out"] = ops.product(a, b)
        return holder["out"]

    cold_s = timed(once, ops.sync)
    out = holder["out"]
    placement = ops.placement(out)
    error = _relative_error(ops.to_numpy(a)[:CHECK_ROWS], ops.to_numpy(b), ops.to_numpy(out)[:CHECK_ROWS])
    if not error <= ops.tolerance:
        raise AssertionError(f"matmul result is wrong: relative error {error:.2e} > {ops.tolerance:.0e}")
    for _ in range(2):  # warm-up: reach steady clocks and caches before calibrating
        timed(once, ops.sync)
    windows = time_windows(once, ops.sync, max_total_s=case.time_budget_s or DEFAULT_BUDGET_S)
    summary = summarize(windows.samples)
    work = flops(n)
    metrics = MatmulMetrics(
        flops_per_call=work, cold_s=cold_s, warm_s=summary.median, cold_flops_per_s=work / cold_s,
        warm_flops_per_s=work / summary.median, warm_iqr_s=summary.iqr, warm_cv=summary.cv,
        warm_ci95_low_s=summary.ci95_low, warm_ci95_high_s=summary.ci95_high, reps_per_window=windows.reps,
        max_rel_error=error,
        warning=summary.warning or ("time budget cut the sample count" if windows.truncated else None),
    ).as_dict()
    return Outcome(metrics=metrics, samples={"warm_s": windows.samples, "cold_s": [cold_s]}, placement=placement)


def _relative_error(a_rows: np.ndarray, b: np.ndarray, out_rows: np.ndarray) -> float:
    ref = a_rows.astype(np.float64) @ b.astype(np.float64)
    return float(np.abs(out_rows - ref).max() / max(np.abs(ref).max(), 1e-30))
