"""Device records from what the frameworks report, without importing a framework (so every spelling
a CUDA, ROCm, TPU or Apple stack reports can be tested here, with objects that carry the same fields).

What the stacks report (the strings tests/data/machines/ records):
- torch CUDA: ``get_device_properties(i).name`` such as "NVIDIA H100 80GB HBM3", ``major``/``minor``.
- torch ROCm: ``name`` such as "AMD Instinct MI300X" (some ROCm releases say "AMD Radeon Graphics" or
  nothing), ``gcnArchName`` such as "gfx942:sramecc+:xnack-", no CUDA compute capability.
- JAX GPU (CUDA and ROCm plugins): ``platform`` "gpu", ``device_kind`` the device name, and
  ``compute_capability`` "9.0" on CUDA but the gfx version ("gfx942") on ROCm (XLA's
  ``MakeComputeCapabilityString``).
- JAX TPU: ``platform`` "tpu", ``device_kind`` "TPU v5 lite", "TPU v5", "TPU v6 lite", "TPU7x", ...
- jax-metal: ``platform`` "METAL"; the jax-mps plugin: "mps". Both are the Apple GPU: kind "mps".
"""

from __future__ import annotations

import re
from typing import Any

from xpubench.devices import specs
from xpubench.devices.device import CPU, GPU, MPS, TPU, device_id, kind_named


def amd_arch(value: Any) -> str | None:
    """"gfx942" from "gfx942:sramecc+:xnack-" or "gfx942"; None when ``value`` is not a gfx string."""
    m = re.match(r"\s*(gfx[0-9a-f]+)", str(value or ""), re.IGNORECASE)
    return m.group(1).lower() if m else None


def cuda_capability(value: Any) -> tuple[int, int] | None:
    """(major, minor) from "9.0" / "8.6" / (9, 0); None for anything else (a gfx string, "unknown")."""
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return int(value[0]), int(value[1])
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", str(value or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def tf32_problem(kind: str | None, vendor: str | None, capability: Any) -> str | None:
    """Why ``tf32`` does not apply to a device (None when it does). TF32 is the tensor-core format of
    NVIDIA GPUs from Ampere on (compute capability >= 8.0). Elsewhere "tf32" would silently mean
    something else: full fp32 on a CPU, TF32-less fp32 on older NVIDIA GPUs, 3 bf16 passes for XLA's
    "tensorfloat32" on a TPU, and whatever ROCm's libraries pick on AMD. So it runs nowhere else."""
    if kind_named(kind) is not GPU:
        return f"tf32 is a format of NVIDIA GPUs (compute capability >= 8.0), not of a {kind or 'unknown'} device"
    if vendor != "nvidia":
        return f"tf32 is measured on NVIDIA GPUs only (compute capability >= 8.0), not on {vendor or 'this'} GPUs"
    cc = cuda_capability(capability)
    if cc is None or cc < (8, 0):
        return f"tf32 needs compute capability >= 8.0 (Ampere or later); this GPU has {capability or 'none'}"
    return None


def is_amd(platform: str, name: str, capability: Any) -> bool:
    text = (name or "").lower()
    return ((platform or "").lower() == "rocm" or amd_arch(capability) is not None
            or any(w in text for w in ("amd", "instinct", "radeon")))


def accelerator(device_id: str, kind: str, name: str, vendor: str, memory: int | None, capability: str | None,
                driver: str | None, per_package: int | None = None, compute_units: int | None = None,
                arch: str | None = None) -> dict[str, Any]:
    """One accelerator's record: what the framework reported, plus the known-chip table's peaks (looked
    up by name, a name several chips share told apart by ``compute_units``; None when unknown)."""
    lookup_name = specs.chip_name(name, compute_units)
    spec = specs.lookup(lookup_name)
    record = {
        "id": device_id, "kind": kind, "name": name, "memory_bytes": memory, "compute_capability": capability,
        "driver": driver, "vendor": vendor,
        "peak_flops": {d: specs.peak_flops(lookup_name, d, per_package) for d in specs.DTYPES},
        "memory_bandwidth": specs.memory_bandwidth(lookup_name, per_package),
        "peak_is_estimate": False, "peak_source": spec.source if spec else None,
        "chip": spec.key if spec else None,
    }
    if compute_units:
        record["compute_units"] = int(compute_units)
    if arch:
        record["arch"] = arch
    return record


def torch_gpu(index: int, props: Any, hip_version: str | None, driver: str | None) -> dict[str, Any]:
    """A ``torch.cuda.get_device_properties(index)`` (CUDA or ROCm build) as a record."""
    arch = getattr(props, "gcnArchName", None) if hip_version else None
    name = (getattr(props, "name", "") or "").strip() or arch or f"gpu {index}"
    capability = None if hip_version else f"{props.major}.{props.minor}"
    return accelerator(f"gpu:{index}", "gpu", name, "amd" if hip_version else "nvidia",
                       int(props.total_memory), capability, driver,
                       compute_units=getattr(props, "multi_processor_count", None), arch=arch or None)


def mps_name(host_cpu: dict[str, Any]) -> str:
    """The Apple GPU's name: the chip's ("Apple M2" -> "Apple M2 GPU"); frameworks report none of their own."""
    model = (host_cpu or {}).get("model") or ""
    return f"{model} GPU" if model.startswith("Apple") else "Apple GPU (MPS)"


def mps(host_cpu: dict[str, Any], memory: int | None) -> dict[str, Any]:
    """The Apple GPU (torch MPS, jax-metal): no published peaks, so every peak is None."""
    return {"id": "mps", "kind": "mps", "name": mps_name(host_cpu), "memory_bytes": memory,
            "compute_capability": None, "driver": None, "vendor": "apple",
            "peak_flops": dict.fromkeys(specs.DTYPES), "memory_bandwidth": None,
            "peak_is_estimate": False, "peak_source": None, "chip": None}


def jax_memory_limit(device: Any) -> int | None:
    """XLA's allocator limit (``memory_stats()["bytes_limit"]``): on a GPU a share of the memory
    (``XLA_PYTHON_CLIENT_MEM_FRACTION``, 75% by default), not the card's total; the record says so
    (``memory_is_limit``) and ``xpubench env`` labels it."""
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - not every platform has memory_stats
        return None
    limit = (stats or {}).get("bytes_limit")
    return int(limit) if limit else None


def jax_devices(found: list, host_cpu: dict[str, Any], cpu_record, nvidia_driver) -> list[dict[str, Any]]:
    """Records for JAX devices (``found``: objects with platform, device_kind, compute_capability, ...).
    ``cpu_record(host_cpu, id)`` builds a CPU record; ``nvidia_driver()`` is asked once, for NVIDIA GPUs."""
    per_chip: dict[tuple, int] = {}
    for d in found:
        if kind_named(d.platform) is TPU and getattr(d, "coords", None) is not None:
            chip = (getattr(d, "process_index", 0), tuple(d.coords))
            per_chip[chip] = per_chip.get(chip, 0) + 1
    index: dict[str, int] = {}
    driver: list[str | None] = []
    out = []
    for d in found:
        kind = kind_named(d.platform)
        n = index.get(kind, 0)
        index[kind] = n + 1
        if kind is CPU:
            out.append(cpu_record(host_cpu, device_id(CPU, n)))
        elif kind is MPS:
            out.append(mps(host_cpu, jax_memory_limit(d)))
        elif kind is TPU:
            out.append(_jax_tpu(d, n, per_chip))
        else:
            out.append(_jax_gpu(d, n, driver, nvidia_driver))
    return out


def _jax_tpu(d: Any, n: int, per_chip: dict[tuple, int]) -> dict[str, Any]:
    name = getattr(d, "device_kind", "") or d.platform
    coords = getattr(d, "coords", None)
    sharing = per_chip.get((getattr(d, "process_index", 0), tuple(coords))) if coords is not None else None
    dev = accelerator(f"tpu:{n}", "tpu", name, "google", jax_memory_limit(d), None, None, sharing)
    spec = specs.lookup(name)
    dev.update(core_on_chip=getattr(d, "core_on_chip", None),
               cores_per_chip=spec.cores_per_chip if spec else None,
               devices_per_chip=sharing or (spec.devices_per_package if spec else None),
               coords=list(coords) if coords is not None else None)
    return dev


def _jax_gpu(d: Any, n: int, driver: list, nvidia_driver) -> dict[str, Any]:
    name = getattr(d, "device_kind", "") or d.platform
    capability = getattr(d, "compute_capability", None)
    amd = is_amd(d.platform, name, capability)
    if not amd and not driver:
        driver.append(nvidia_driver())
    arch = amd_arch(capability)
    dev = accelerator(f"gpu:{n}", "gpu", name, "amd" if amd else "nvidia", jax_memory_limit(d),
                      None if amd or capability is None else str(capability), None if amd else driver[0],
                      compute_units=getattr(d, "core_count", None), arch=arch)
    dev["memory_is_limit"] = dev["memory_bytes"] is not None
    return dev
