"""Is B faster than A? The ratio of two setups' figures with its 95% interval, and a verdict that calls a
difference only when the measurements carry it (docs/methodology.md; compare, the answer, the advice and
the frameworks table all read it).

A setup's figure is the median of its worker processes' medians of the headline raw samples. The
two-level bootstrap (results/stats.py) resamples the processes with replacement, then each drawn
process's samples, independently on each side (seeded, 5,000 resamples); the interval is the
2.5th-97.5th percentile of figure(B*) / figure(A*). A difference is called only when the interval
excludes 1, the ratio is at least ``min_change`` (5%) away from 1 and, with two or more processes a
side, every process of one side was slower than every process of the other. One process on a side:
called from the samples but "(provisional)"; fewer than 3 samples a side: "not significant".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xpubench.results.stats import as_groups, hierarchical_bootstrap, separated

RESAMPLES = 5000
LEVEL = 0.95
MIN_SAMPLES = 3
MIN_CHANGE = 0.05

PROVISIONAL = ("one process on a side: the machine's noise between processes (1.8x seen on shared VMs) is "
               "not in the interval; measure with --processes 3 or more")


@dataclass(frozen=True)
class RatioEstimate:
    ratio: float            # figure(b) / figure(a), figure = median of the process medians
    low: float              # two-level bootstrap interval of the ratio
    high: float
    significant: bool
    verdict: str            # "1.52x slower", "1.10x faster", "not significant", "... (provisional)"
    note: str = ""          # why it is not significant, or why it is provisional
    processes_a: int = 1
    processes_b: int = 1

    @property
    def provisional(self) -> bool:
        return self.significant and min(self.processes_a, self.processes_b) < 2


def ratio_estimate(a, b, *, min_change: float = MIN_CHANGE, seed: int = 0) -> RatioEstimate | None:
    """Figure of B over figure of A with its two-level bootstrap interval (see the module docstring);
    ``a`` and ``b`` are samples of one process or a list of per-process samples. None without data."""
    ga, gb = as_groups(a), as_groups(b)
    if not ga or not gb:
        return None
    fig_a = float(np.median([np.median(g) for g in ga]))
    fig_b = float(np.median([np.median(g) for g in gb]))
    if fig_a <= 0:
        return None
    ratio = fig_b / fig_a
    boot = hierarchical_bootstrap(gb, resamples=RESAMPLES, seed=seed + 1) / hierarchical_bootstrap(
        ga, resamples=RESAMPLES, seed=seed)
    tail = (1 - LEVEL) / 2 * 100
    low, high = (float(v) for v in np.percentile(boot, [tail, 100 - tail]))
    counts = {"processes_a": len(ga), "processes_b": len(gb)}

    def not_significant(note: str) -> RatioEstimate:
        return RatioEstimate(ratio, low, high, False, "not significant", note, **counts)

    if min(sum(g.size for g in ga), sum(g.size for g in gb)) < MIN_SAMPLES:
        return not_significant(f"fewer than {MIN_SAMPLES} samples: spread unknown")
    if low <= 1.0 <= high:
        return not_significant("the 95% interval contains 1")
    if abs(ratio - 1.0) < min_change:
        return not_significant(f"a change below {min_change:.0%} (run-to-run drift)")
    provisional = min(len(ga), len(gb)) < 2
    if not provisional and not separated(ga, gb):
        return not_significant("the processes overlap: a process of the faster side was slower than one of "
                               "the other (the machine's state, not the code, can explain it)")
    verdict = f"{ratio:.2f}x slower" if ratio > 1 else f"{1 / ratio:.2f}x faster"
    if provisional:
        return RatioEstimate(ratio, low, high, True, f"{verdict} (provisional)", PROVISIONAL, **counts)
    return RatioEstimate(ratio, low, high, True, verdict, **counts)
