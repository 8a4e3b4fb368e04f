"""Figures derived from a case's measurements and the chip's peak: % of peak for matmul, MFU for models.

The peak comes from the environment recorded in the fingerprint: the known-chip table for accelerators,
the labelled estimate for CPUs. An unknown chip has no peak: its % of peak / MFU is None ("n/a").
"""

from __future__ import annotations

from typing import Any


def device_record(fp: dict, backend: str, device: str) -> dict:
    """The device's record in an environment or fingerprint: for a Keras case the record of the framework
    it runs on (keras:jax on jax's devices: the Keras record lists none of its own)."""
    from xpubench.plan.defaults import device_backend

    info = (fp.get("backends") or {}).get(device_backend(backend)) or {}
    for dev in info.get("devices") or []:
        if isinstance(dev, dict) and dev.get("id") == device:
            return dev
    return {}


def peak_for(fp: dict, backend: str, device: str, precision: str) -> tuple[float | None, bool]:
    """(peak FLOP/s of one device at this precision or None, whether it is an estimate)."""
    if device == "cpu":
        est = fp.get("host", {}).get("cpu", {}).get("peak_estimate", {}).get(precision) or {}
        value = est.get("value") if isinstance(est, dict) else None
        return (float(value), True) if value else (None, True)
    value = (device_record(fp, backend, device).get("peak_flops") or {}).get(precision)
    return (float(value), False) if value else (None, False)


def add_peak_metrics(metrics: dict[str, Any], case: dict, fp: dict) -> None:
    """Adds peak_flops_per_s, peak_is_estimate and pct_of_peak (matmul) or mfu (models) in place."""
    precision = case.get("precision", "fp32")   # int8 work against the int8 peak (ops/s), like every dtype
    peak, estimate = peak_for(fp, case["backend"], case["device"], precision)
    devices = case.get("devices", 1) or 1
    if case["device"] == "cpu" and devices > 1:
        devices = 1  # CPU "devices" share the same cores: the chip peak is the whole CPU's
    total = peak * devices if peak else None
    metrics["peak_flops_per_s"] = total
    metrics["peak_is_estimate"] = estimate if total else None
    achieved = metrics.get("warm_flops_per_s") if case.get("mode") == "matmul" else metrics.get(
        "achieved_flops_per_s")
    ratio = achieved / total if (achieved and total) else None
    metrics["pct_of_peak" if case.get("mode") == "matmul" else "mfu"] = ratio
    if ratio and ratio > 1 and estimate:
        metrics["peak_warning"] = ("above the estimated CPU peak: the estimate's clock is lower than the clock "
                                   "the chip ran at (see the estimate's basis)")
