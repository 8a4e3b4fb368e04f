"""% of peak for matmul, MFU for models: the achieved rate against the chip's peak at the case's precision
(backends/peaks.py reads it from the result's fingerprint). An unknown chip has no peak: n/a."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from xpubench.backends.peaks import peak_for
from xpubench.case import Case
from xpubench.devices.device import kind_of
from xpubench.results.modes import mode_of


def add_peak_metrics(metrics: MutableMapping[str, Any], case: Case, fp: dict) -> None:
    """Adds peak_flops_per_s, peak_is_estimate and the mode's ``peak_share`` (results/modes.py: pct_of_peak for
    matmul, mfu for models) in place."""
    # int8 work against the int8 peak (ops/s), like every dtype; int8 weight-only generation computes in
    # its ``compute_precision`` (bf16) and is measured against that peak
    precision = metrics.get("compute_precision") or case.precision
    peak, estimate = peak_for(fp, case.backend, case.device, precision)
    devices = 1 if kind_of(case.device).shared else case.devices   # CPU "devices" share the same cores: the whole CPU's
    total = peak * devices if peak else None
    metrics["peak_flops_per_s"] = total
    metrics["peak_is_estimate"] = estimate if total else None
    mode = mode_of(case.mode)
    if mode is None or mode.peak_share is None:
        return
    achieved = mode.flops(metrics)
    ratio = achieved / total if (achieved and total) else None
    metrics[mode.peak_share] = ratio
    if ratio and ratio > 1 and estimate:
        metrics["peak_warning"] = ("above the estimated CPU peak: the estimate's clock is lower than the clock "
                                   "the chip ran at (see the estimate's basis)")
