"""A chip looked up by the name torch, JAX or nvidia-smi reports (its figures are the table in
devices/chips.py): the spec whose patterns match the normalised name, and ONE framework device's share
of its dense peak FLOP/s per dtype, memory and memory bandwidth (the package's figure divided by the
devices it shows as). An unknown chip, or a figure the vendor does not publish, is None ("n/a").
"""

from __future__ import annotations

import re

from xpubench.devices.chips import CHIPS, ChipSpec

DTYPES = ("fp32", "tf32", "bf16", "fp16", "int8")
_ALIASES = {"float32": "fp32", "f32": "fp32", "tensorfloat32": "tf32", "bfloat16": "bf16", "float16": "fp16",
            "half": "fp16", "f16": "fp16", "i8": "int8"}


_COMPILED = tuple((spec, tuple(re.compile(p) for p in spec.patterns)) for spec in CHIPS)
_DROP = {"nvidia", "tesla", "amd", "instinct", "google", "cloud"}


def normalise(device_name: str) -> str:
    """Lower case, separators as spaces, vendor words dropped: 'NVIDIA A100-SXM4-40GB' -> 'a100 sxm4 40gb'."""
    words = re.sub(r"[-_/(),]+", " ", device_name.lower()).split()
    return " ".join(w for w in words if w not in _DROP)


# names a vendor gives to more than one chip, told apart by the compute units of one framework device
SHARED_NAMES = {"mi250x mi250": {110: "AMD Instinct MI250X", 104: "AMD Instinct MI250"}}


def chip_name(device_name: str | None, compute_units: int | None = None) -> str | None:
    """The name to look a chip up by: ``device_name``, or for a name several chips share the one its
    compute-unit count identifies. A shared name the count does not decide stays unknown (None)."""
    if not device_name:
        return None
    shared = SHARED_NAMES.get(normalise(device_name))
    if shared is None:
        return device_name
    return shared.get(compute_units) if compute_units else None


def lookup(device_name: str | None) -> ChipSpec | None:
    """The spec for a name as torch / JAX / nvidia-smi report it, or None for an unknown chip."""
    if not device_name:
        return None
    name = normalise(device_name)
    for spec, patterns in _COMPILED:
        if any(p.fullmatch(name) for p in patterns):
            return spec
    return None


def canonical_dtype(dtype: str) -> str:
    d = dtype.lower().strip()
    return _ALIASES.get(d, d)


def peak_flops(device_name: str | None, dtype: str, devices_per_package: int | None = None) -> float | None:
    """Dense peak FLOP/s (int8: ops/s) of ONE framework device, or None when unknown or not published.

    ``devices_per_package`` overrides the table's count (detection passes the JAX devices it saw per TPU
    chip, so a split-mode v4/v5p chip is shared correctly).
    """
    spec = lookup(device_name)
    if spec is None:
        return None
    value = spec.peak.get(canonical_dtype(dtype))
    return None if value is None else value / (devices_per_package or spec.devices_per_package)


def memory_bandwidth(device_name: str | None, devices_per_package: int | None = None) -> float | None:
    """Peak memory bandwidth in bytes/s of ONE framework device, or None when unknown."""
    spec = lookup(device_name)
    if spec is None or spec.bandwidth is None:
        return None
    return spec.bandwidth / (devices_per_package or spec.devices_per_package)


def memory_bytes(device_name: str | None, devices_per_package: int | None = None) -> int | None:
    """Nominal memory of ONE framework device, or None when unknown (frameworks report the real figure)."""
    spec = lookup(device_name)
    if spec is None or spec.memory_bytes is None:
        return None
    return spec.memory_bytes // (devices_per_package or spec.devices_per_package)
