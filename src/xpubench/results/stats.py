"""Summary statistics of raw timing samples, with a warning when they are too spread to trust.

Robust by default: the median and the inter-quartile range lead, the mean and standard deviation are
kept for reference. The 95% confidence interval of the median comes from a seeded percentile
bootstrap, so the same samples always give the same interval.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

import numpy as np

CV_WARN = 0.10          # pyperf's rule: a stdev of 10% of the mean or more is not stable
MIN_SAMPLES = 3         # fewer samples than this cannot show a spread
BOOTSTRAP_RESAMPLES = 2000


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    stdev: float
    min: float
    max: float
    q1: float
    q3: float
    iqr: float
    p90: float
    cv: float               # stdev / mean
    ci95_low: float         # bootstrap 95% interval of the median
    ci95_high: float
    warning: str | None     # why the figure should not be trusted, or None

    def as_dict(self) -> dict:
        return asdict(self)


def bootstrap_median_ci(values: np.ndarray, *, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap interval of the median (seeded: the same samples give the same interval)."""
    if values.size < 2:
        return float(values[0]), float(values[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, values.size, size=(BOOTSTRAP_RESAMPLES, values.size))
    medians = np.median(values[idx], axis=1)
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(medians, [tail, 100.0 - tail])
    return float(low), float(high)


def summarize(values, *, cv_warn: float = CV_WARN, min_samples: int = MIN_SAMPLES) -> Summary:
    """Summarise raw samples (e.g. seconds per call). Raises ValueError on an empty sequence."""
    arr = np.asarray(list(values), dtype=np.float64)
    if arr.size == 0:
        raise ValueError("no samples to summarise")
    mean = float(arr.mean())
    stdev = float(arr.std(ddof=1)) if arr.size > 1 else 0.0
    q1, median, q3, p90 = (float(v) for v in np.percentile(arr, [25, 50, 75, 90]))
    cv = stdev / mean if mean > 0 else 0.0
    low, high = bootstrap_median_ci(arr)
    warning = None
    if arr.size < min_samples:
        warning = f"only {arr.size} sample(s): spread unknown"
    elif cv >= cv_warn:
        warning = f"unstable: stdev is {cv:.0%} of the mean (>= {cv_warn:.0%})"
    return Summary(
        n=int(arr.size), median=median, mean=mean, stdev=stdev, min=float(arr.min()), max=float(arr.max()),
        q1=q1, q3=q3, iqr=q3 - q1, p90=p90, cv=cv, ci95_low=low, ci95_high=high, warning=warning,
    )


# ---- two levels: worker processes, and samples within each process -----------------------------------
#
# On a shared machine the noise that matters lives between processes (a whole process runs 1.8x slower:
# thread placement, the hypervisor), not between the windows of one process. A case is therefore measured
# in several processes, and its figure and interval come from both levels (Kalibera & Jones, "Rigorous
# Benchmarking in Reasonable Time", ISMM 2013): the headline is the median of the process medians, its
# interval a hierarchical bootstrap that resamples processes, then samples within each chosen process.

DISAGREE_SPREAD = 0.10    # process medians this far apart (range / median) ...
DISAGREE_FACTOR = 4.0     # ... and this many times the spread inside a process: the machine changed
BIMODAL_GAP_SHARE = 0.75  # one gap between sorted process medians holding this share of their range


@dataclass(frozen=True)
class TwoLevel:
    processes: int              # processes with samples
    median: float               # median of the process medians
    ci95_low: float             # hierarchical bootstrap interval of that median
    ci95_high: float
    process_medians: tuple[float, ...]
    between_spread: float | None  # (max - min) / median of the process medians; None with one process
    within_spread: float        # median over processes of IQR / median of their own samples
    disagreement: str | None    # None, "bimodal" or "machine state changed"
    note: str | None            # the sentence that explains the disagreement

    def as_dict(self) -> dict:
        return asdict(self)


def as_groups(values) -> list[np.ndarray]:
    """Samples as one array per process: a flat sequence of numbers is one process."""
    items = list(values) if values is not None else []
    if items and all(np.ndim(v) == 0 for v in items):
        items = [items]
    groups = [np.asarray(g, dtype=np.float64) for g in items]
    return [g[np.isfinite(g)] for g in groups if np.size(g)]


def hierarchical_bootstrap(groups, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> np.ndarray:
    """``resamples`` bootstrap replicates of the median of process medians: each replicate draws the
    processes with replacement, then each drawn process's samples with replacement (an independent draw
    every time a process is drawn). With one process this is the ordinary bootstrap of its median.
    Read-only; the same samples and seed give the same replicates, so they are drawn once per process (a
    report estimates one pair's ratio in its summary, its answer and its advice)."""
    groups = as_groups(groups)
    if not groups:
        raise ValueError("no samples to resample")
    return _bootstrap(tuple(g.tobytes() for g in groups), resamples, seed)


@functools.lru_cache(maxsize=128)
def _bootstrap(samples: tuple[bytes, ...], resamples: int, seed: int) -> np.ndarray:
    groups = [np.frombuffer(b, dtype=np.float64) for b in samples]
    rng = np.random.default_rng(seed)
    k = len(groups)
    # medians[j] has shape (resamples, k): k independent within-process resamples of process j
    medians = np.stack([np.median(g[rng.integers(0, g.size, (resamples, k, g.size))], axis=2) for g in groups])
    if k == 1:
        boot = medians[0, :, 0]
    else:
        chosen = rng.integers(0, k, (resamples, k))
        picked = np.take_along_axis(medians.transpose(1, 2, 0), chosen[:, :, None], axis=2)[:, :, 0]
        boot = np.median(picked, axis=1)
    boot.setflags(write=False)
    return boot


def _relative_iqr(g: np.ndarray) -> float:
    if g.size < 2 or np.median(g) <= 0:
        return 0.0
    q1, q3 = np.percentile(g, [25, 75])
    return float((q3 - q1) / np.median(g))


def disagreement(process_medians, within_spread: float) -> tuple[str | None, str | None]:
    """(kind, sentence) when the processes disagree far more than their own samples do, else (None, None).

    "bimodal": the sorted process medians fall in two groups (one gap holds most of their range);
    "machine state changed": they spread without such a gap."""
    pm = np.sort(np.asarray(process_medians, dtype=np.float64))
    if pm.size < 2 or pm[0] <= 0:
        return None, None
    centre = float(np.median(pm))
    spread = float((pm[-1] - pm[0]) / centre)
    if spread < DISAGREE_SPREAD or spread < DISAGREE_FACTOR * max(within_spread, 0.005):
        return None, None
    gaps = np.diff(pm)
    cut = int(np.argmax(gaps))
    within = f"{within_spread:.1%} inside a process"
    if gaps[cut] >= BIMODAL_GAP_SHARE * (pm[-1] - pm[0]):
        fast, slow = pm[:cut + 1], pm[cut + 1:]
        ratio = float(np.median(slow) / np.median(fast))   # > 1: a time, the slow group's over the fast one's
        few, which = (slow, "slower") if slow.size <= fast.size else (fast, "faster")
        return "bimodal", (f"bimodal: {few.size} of {pm.size} processes ran {ratio:.2f}x {which} than the others "
                           f"({within}): the machine's state changed between processes")
    return "machine state changed", (f"processes disagree: their medians span {spread:.0%} of the median "
                                     f"({within}): the machine's state changed during the run")


def two_level(groups, *, seed: int = 0) -> TwoLevel:
    """The headline and its interval over both levels, and whether the processes disagree."""
    groups = as_groups(groups)
    if not groups:
        raise ValueError("no samples to summarise")
    pm = np.array([np.median(g) for g in groups])
    boot = hierarchical_bootstrap(groups, seed=seed)
    low, high = (float(v) for v in np.percentile(boot, [2.5, 97.5]))
    median = float(np.median(pm))
    within = float(np.median([_relative_iqr(g) for g in groups]))
    between = float((pm.max() - pm.min()) / median) if pm.size > 1 and median > 0 else None
    kind, note = disagreement(pm, within)
    return TwoLevel(processes=len(groups), median=median, ci95_low=low, ci95_high=high,
                    process_medians=tuple(float(v) for v in pm), between_spread=between,
                    within_spread=within, disagreement=kind, note=note)


def separated(groups_a, groups_b) -> bool:
    """Whether every process median of one side lies beyond every process median of the other."""
    a = [np.median(g) for g in as_groups(groups_a)]
    b = [np.median(g) for g in as_groups(groups_b)]
    return bool(a and b and (min(b) > max(a) or max(b) < min(a)))


def named_warnings(summaries: dict[str, Summary]) -> str | None:
    """The summaries' warnings as one line, each prefixed with its name ("decode: unstable: ..."), or None."""
    return "; ".join(f"{name}: {s.warning}" for name, s in summaries.items() if s.warning) or None
