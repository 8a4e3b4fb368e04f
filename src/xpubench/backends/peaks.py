"""The device a backend's case runs on, in an environment record or a result's fingerprint, and its peak.

The peak comes from the environment recorded in the fingerprint: the known-chip table for accelerators,
the labelled estimate for CPUs. An unknown chip has no peak: None ("n/a"), never a guess.
"""

from __future__ import annotations

from xpubench.devices.device import is_cpu


def device_record(fp: dict, backend: str, device: str) -> dict:
    """The device's record in an environment or fingerprint: for a Keras case the record of the framework
    it runs on (keras:jax on jax's devices: the Keras record lists none of its own)."""
    from xpubench.backends import device_backend

    info = (fp.get("backends") or {}).get(device_backend(backend)) or {}
    for dev in info.get("devices") or []:
        if isinstance(dev, dict) and dev.get("id") == device:
            return dev
    return {}


def peak_for(fp: dict, backend: str, device: str, precision: str) -> tuple[float | None, bool]:
    """(peak FLOP/s of one device at this precision or None, whether it is an estimate)."""
    if is_cpu(device):   # the host's estimate (devices/cpu_peak.py)
        est = fp.get("host", {}).get("cpu", {}).get("peak_estimate", {}).get(precision) or {}
        value = est.get("value") if isinstance(est, dict) else None
        return (float(value), True) if value else (None, True)
    value = (device_record(fp, backend, device).get("peak_flops") or {}).get(precision)
    return (float(value), False) if value else (None, False)
