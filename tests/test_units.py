"""Human-readable quantities (units.py): a slow case's rate keeps its significant figures."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from xpubench.report.render.terminal import headline
from xpubench.report.tables.headline import figure
from xpubench.units import fmt_rate


@pytest.mark.parametrize("rate, shown", [(0.0004123, "0.000412"), (0.412, "0.412"), (0.9996, "1.00"), (5, "5.00"),
                                         (12.345, "12.3"), (99.96, "100"), (106.2, "106"), (12345.6, "12,346"),
                                         (0, "0"), (None, "n/a"), (float("nan"), "n/a")])
def test_rates_keep_three_significant_figures_below_100(rate, shown):
    assert fmt_rate(rate) == shown


def test_a_slow_case_never_reads_zero_samples_per_second():
    train = SimpleNamespace(mode="train", metrics={"samples_per_s": 0.37})
    infer = SimpleNamespace(mode="infer", metrics={"samples_per_s": 2.5, "latency_s": 12.8})
    assert headline(train) == "0.370 samples/s"
    assert headline(infer).startswith("2.50 samples/s, 12,800.00 ms/batch")
    assert figure({"status": "ok", "mode": "train", "workload": "vit", "samples_per_s": 0.37}) == "0.370 samples/s"
