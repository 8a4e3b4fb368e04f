"""The matmul mode's figures (results/metrics.py; harness/matmul.py fills them): one N x N product's
FLOPs, its cold and warm times and rates, the spread of the warm windows, and its error against float64."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xpubench.results.metric_base import figure
from xpubench.results.metrics_common import Common


@dataclass
class MatmulMetrics(Common):
    """N x N products (harness/matmul.py)."""

    GROUP: ClassVar[str] = "matmul"
    flops_per_call: float | None = figure("FLOP", "2 N^3: one product")
    cold_s: float | None = figure("s", "the first product, compile and library set-up included")
    warm_s: float | None = figure("s", "steady product time: median of calibrated windows (of the processes' "
                                       "medians, with several processes)")
    cold_flops_per_s: float | None = figure("FLOP/s", "flops_per_call / cold_s")
    warm_flops_per_s: float | None = figure("FLOP/s", "flops_per_call / warm_s")
    warm_iqr_s: float | None = figure("s", "inter-quartile range of the warm windows")
    warm_cv: float | None = figure("ratio", "coefficient of variation of the warm windows")
    warm_ci95_low_s: float | None = figure("s", "95% interval of warm_s, low end")
    warm_ci95_high_s: float | None = figure("s", "95% interval of warm_s, high end")
    reps_per_window: int | None = figure("count", "products per timed window (calibrated)")
    max_rel_error: float | None = figure("ratio", "largest error of checked rows against float64, relative to "
                                                  "the largest value")
