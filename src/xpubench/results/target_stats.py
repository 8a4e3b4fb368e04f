"""Time to target, pure arithmetic: from one run's evaluation curve to its time, epochs and samples to
the target; from the case's seeds (one worker process each) to MLPerf's trimmed mean, its bootstrap
interval and the ratio of two setups. Nothing here trains or reads a clock (docs/methodology.md,
"Time to target").

A run that did not reach the target has no time: it enters the trimmed mean as the slowest run, as MLPerf
Training scores a non-converging run; with more than one such run the case has no time to target.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from xpubench.results.targets import Target

RESAMPLES = 2000
LEVEL = 0.95
MIN_SEEDS_FOR_INTERVAL = 3   # fewer seeds cannot show a spread: no interval (None)


@dataclass(frozen=True)
class EvalPoint:
    """One evaluation of a run: after ``steps`` optimizer steps, ending ``wall_s`` seconds after the first
    training step began (every evaluation so far included), ``eval_s`` of which were this evaluation."""

    steps: int
    wall_s: float
    eval_s: float
    value: float | None      # the target's metric (None: NaN, a diverged model)


def run_figures(points: list[EvalPoint], target: Target, *, steps_per_epoch: int, global_batch: int) -> dict:
    """One run's figures (metrics_target.py names) from its evaluations in order: the first evaluation
    that reaches the target stops the clock; without one, ``target_reached`` is False, the times are None
    and ``target_best`` says how close it came."""
    best, best_at, eval_total = None, None, 0.0
    for i, p in enumerate(points):
        eval_total += p.eval_s
        if target.better(p.value, best):
            best, best_at = p.value, p.steps / steps_per_epoch
        if target.reached(p.value):
            return {"target_reached": True, "time_to_target_s": p.wall_s,
                    "time_to_target_no_eval_s": p.wall_s - eval_total, "epochs_to_target": p.steps / steps_per_epoch,
                    "steps_to_target": p.steps, "samples_to_target": p.steps * global_batch,
                    "target_best": best, "target_best_epoch": best_at, "target_evaluations": i + 1}
    return {"target_reached": False, "time_to_target_s": None, "time_to_target_no_eval_s": None,
            "epochs_to_target": None, "steps_to_target": None, "samples_to_target": None,
            "target_best": best, "target_best_epoch": best_at, "target_evaluations": len(points)}


def _as_times(times) -> np.ndarray:
    """Seconds per run, None (not reached) as +inf."""
    return np.array([np.inf if t is None else float(t) for t in times], dtype=np.float64)


def _trimmed(sorted_times: np.ndarray) -> np.ndarray:
    """Trimmed mean along the last axis of already sorted times: with 3 or more runs the first (fastest)
    and last (slowest) dropped; +inf where a kept run did not reach the target."""
    kept = sorted_times[..., 1:-1] if sorted_times.shape[-1] >= 3 else sorted_times
    with np.errstate(invalid="ignore"):
        return kept.mean(axis=-1)


def trimmed_mean(times) -> float | None:
    """MLPerf Training's benchmark result over runs: drop the fastest and the slowest, average the rest; a
    run that did not reach the target (None) is the slowest, so one such run is dropped and two or more
    leave no result (None). With fewer than 3 runs nothing is dropped (their plain mean)."""
    arr = _as_times(times)
    if arr.size == 0:
        return None
    value = float(_trimmed(np.sort(arr)))
    return value if np.isfinite(value) else None


def _replicates(times, resamples: int, seed: int) -> np.ndarray:
    """Bootstrap replicates of the trimmed mean: the runs drawn with replacement (seeded)."""
    arr = _as_times(times)
    rng = np.random.default_rng(seed)
    draws = arr[rng.integers(0, arr.size, (resamples, arr.size))]
    return _trimmed(np.sort(draws, axis=1))


def _quantiles(values: np.ndarray) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles as values that occurred (no interpolation: +inf stays +inf)."""
    tail = (1 - LEVEL) / 2
    low, high = np.quantile(values, [tail, 1 - tail], method="inverted_cdf")
    return float(low), float(high)


def interval(times, *, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float | None, float | None]:
    """95% percentile-bootstrap interval of the trimmed mean; (None, None) with fewer than 3 runs or no
    time to target; a high end of None: unbounded (resamples with two runs short of the target)."""
    if len(times) < MIN_SEEDS_FOR_INTERVAL or trimmed_mean(times) is None:
        return None, None
    low, high = _quantiles(_replicates(times, resamples, seed))
    return low, (high if np.isfinite(high) else None)


@dataclass(frozen=True)
class TimeRatio:
    """How many times longer B takes than A to reach the target (> 1: A is sooner)."""

    ratio: float
    low: float | None
    high: float | None       # None: unbounded
    significant: bool
    note: str = ""


def ratio(times_a, times_b, *, min_change: float = 0.05, seed: int = 0) -> TimeRatio | None:
    """trimmed mean(B) / trimmed mean(A) with a 95% bootstrap interval (each side's runs resampled on its
    own; replicates where neither side reaches the target are left out). Significant when the interval
    excludes 1 and the ratio is at least ``min_change`` away from 1. None when a side has no time."""
    mean_a, mean_b = trimmed_mean(times_a), trimmed_mean(times_b)
    if mean_a is None or mean_b is None or mean_a <= 0:
        return None
    value = mean_b / mean_a
    if min(len(times_a), len(times_b)) < MIN_SEEDS_FOR_INTERVAL:
        return TimeRatio(value, None, None, False, f"fewer than {MIN_SEEDS_FOR_INTERVAL} seeds a side: no interval")
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = _replicates(times_b, RESAMPLES, seed + 1) / _replicates(times_a, RESAMPLES, seed)
    low, high = _quantiles(boot[~np.isnan(boot)])
    high_or_none = high if np.isfinite(high) else None
    if low <= 1.0 <= high:
        return TimeRatio(value, low, high_or_none, False, "the 95% interval contains 1")
    if abs(value - 1.0) < min_change:
        return TimeRatio(value, low, high_or_none, False, f"a change below {min_change:.0%}")
    return TimeRatio(value, low, high_or_none, True)


def _finite(value: float) -> float | None:
    return value if np.isfinite(value) else None


def _median(values: list):
    values = [v for v in values if v is not None]
    if not values:
        return None
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return statistics.median_low(values)
    return float(statistics.median(values))


def fold(per_seed: list[dict], target: Target) -> dict:
    """The case's figures from its seeds' metrics (one dict per worker process that ended ok)."""
    times = [m.get("time_to_target_s") for m in per_seed]
    reached = [t for t in times if t is not None]
    low, high = interval(times)
    best = None
    for m in per_seed:
        if target.better(m.get("target_best"), best):
            best = m.get("target_best")
    mean = trimmed_mean(times)
    return {
        "seeds": len(per_seed), "seeds_reached": len(reached), "target_reached": mean is not None,
        "time_to_target_s": mean,
        "time_to_target_no_eval_s": trimmed_mean([m.get("time_to_target_no_eval_s") for m in per_seed]),
        "time_to_target_median_s": _finite(float(np.median(_as_times(times)))) if times else None,
        "time_to_target_min_s": min(reached) if reached else None,
        "time_to_target_max_s": max(reached) if reached else None,
        "time_to_target_ci95_low_s": low, "time_to_target_ci95_high_s": high,
        "epochs_to_target": _median([m.get("epochs_to_target") for m in per_seed]),
        "steps_to_target": _median([m.get("steps_to_target") for m in per_seed]),
        "samples_to_target": _median([m.get("samples_to_target") for m in per_seed]),
        "target_best": best, "target_best_epoch": None, "seed": None,
    }


def status(metrics: dict) -> str:
    """One line on a case's (or a run's) target: "reached by 5 of 5 seeds", "not reached (best 0.9712)"."""
    seeds, hit = metrics.get("seeds"), metrics.get("seeds_reached")
    best = metrics.get("target_best")
    best_text = "n/a" if best is None else f"{best:.4g}"
    if seeds:   # a case
        if not metrics.get("target_reached"):
            return f"not reached (by {hit} of {seeds} seeds; best {best_text})"
        return f"reached by {hit} of {seeds} seeds"
    return "reached" if metrics.get("target_reached") else f"not reached (best {best_text})"
