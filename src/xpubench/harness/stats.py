"""Summary statistics of raw timing samples, with a warning when they are too spread to trust.

Robust by default: the median and the inter-quartile range lead, the mean and standard deviation are
kept for reference. The 95% confidence interval of the median comes from a seeded percentile
bootstrap, so the same samples always give the same interval.
"""

from __future__ import annotations

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


def named_warnings(summaries: dict[str, Summary]) -> str | None:
    """The summaries' warnings as one line, each prefixed with its name ("decode: unstable: ..."), or None."""
    return "; ".join(f"{name}: {s.warning}" for name, s in summaries.items() if s.warning) or None
