"""Device lookup, synchronisation, placement and peak memory for JAX."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from xpubench.devices import device as ids
from xpubench.devices.precisions import fp16_problem
from xpubench.devices.records import is_amd, tf32_problem
from xpubench.errors import UserError

DTYPES = {"fp32": jnp.float32, "tf32": jnp.float32, "bf16": jnp.bfloat16, "fp16": jnp.float16}


def kind_of(device) -> ids.Kind:
    """xpubench's kind of a JAX device: CPU, GPU (CUDA and ROCm), TPU, MPS (jax-metal's "METAL")."""
    return ids.kind_of(device.platform)


def devices_of_kind(kind: ids.Kind) -> list:
    """Every JAX device of one kind, in JAX's order (the order detection numbers them in)."""
    seen: list = []
    for platform in (None, "cpu"):     # the default backend (the accelerator, if any), then the host
        try:
            seen += [d for d in jax.devices(platform) if d not in seen]
        except RuntimeError:
            continue
    return [d for d in seen if kind_of(d) == kind]


def tf32_unavailable(device) -> str | None:
    """Why tf32 does not apply on this JAX device (devices/records.py tf32_problem), or None."""
    capability = getattr(device, "compute_capability", None)
    amd = is_amd(device.platform, getattr(device, "device_kind", ""), capability)
    return tf32_problem(kind_of(device), "amd" if amd else "nvidia", capability)


def gpu_identity(device) -> dict:
    """The GPU's vendor for the energy meter (energy/windows.py); JAX reports no UUID, so the board is
    found through the visible-devices variables (energy/gpu.py physical_gpu)."""
    amd = is_amd(device.platform, getattr(device, "device_kind", ""), getattr(device, "compute_capability", None))
    return {"vendor": "amd" if amd else "nvidia", "uuid": None}


def precision_problem(device, precision: str) -> str | None:
    """Why a case at ``precision`` would not measure that format on this JAX device, or None: tf32 off
    NVIDIA Ampere+ (``tf32_unavailable``), fp16 on a TPU (devices/precisions.py)."""
    if precision == "tf32":
        return tf32_unavailable(device)
    return fp16_problem(kind_of(device)) if precision == "fp16" else None


def jax_devices(device_id: str, count: int = 1) -> list:
    """The first ``count`` JAX devices of the kind named by ``device_id``; refuses, never falls back."""
    wanted = ids.Device.parse(device_id)
    found = devices_of_kind(wanted.kind)
    start = wanted.index
    if len(found) < start + count:
        raise UserError(f"device {device_id} x{count} is not available to jax (found {len(found)} {wanted.kind})")
    return found[start:start + count]


def device_id(device) -> str:
    """The xpubench id of a JAX device ("cpu", "gpu:1", "tpu:3", "mps"): its position among its kind."""
    kind = kind_of(device)
    return ids.device_id(kind, devices_of_kind(kind).index(device))


def placement(array) -> str:
    """Where an array lives: one device id, or "kind:first..last (N devices)"."""
    devices = list(array.devices())
    kinds = {kind_of(d) for d in devices}
    kind = kinds.pop() if len(kinds) == 1 else None
    if len(devices) == 1:
        return device_id(devices[0])
    order = devices_of_kind(kind) if kind is not None else []
    index = sorted(order.index(d) for d in devices) if order else sorted(d.id for d in devices)
    return f"{kind or 'mixed'}:{index[0]}..{index[-1]} ({len(devices)} devices)"


class PeakMemory:
    """The peak-memory figure of a measurement (docs/methodology.md, "Peak memory"): the highest memory
    in use between ``reset()`` (right before measuring) and ``read()``. XLA's ``peak_bytes_in_use`` has
    no reset (jax-ml/jax#8096): it is the process's high-water mark, so ``read()`` gives it only when
    the measurement raised it above its value at ``reset()``, else None (an earlier phase, such as an
    inference case's training, was higher: the region's own peak is unknown). On the CPU: the process's
    resident set (devices/memory.py)."""

    def __init__(self, devices: list):
        self.devices = [d for d in devices if d.process_index == jax.process_index()]
        self.before: list[int | None] = []

    def _peaks(self) -> list[int | None]:
        out = []
        for d in self.devices:
            stats = d.memory_stats() if hasattr(d, "memory_stats") else None
            out.append(int(stats["peak_bytes_in_use"]) if stats and "peak_bytes_in_use" in stats else None)
        return out

    def reset(self) -> None:
        from xpubench.devices import memory

        memory.reset_host_peak()
        self.before = self._peaks()

    def read(self) -> int | None:
        from xpubench.devices import memory

        if not any(kind_of(d).accelerator for d in self.devices):
            return memory.host_peak_bytes()
        now, before = self._peaks(), self.before or [None] * len(self.devices)
        if any(n is None for n in now):
            return None
        raised = [n for n, b in zip(now, before) if b is None or n > b]
        below = [b for n, b in zip(now, before) if b is not None and n <= b]   # region peak <= b: unknown
        return max(raised) if raised and max(raised) >= max(below, default=0) else None


def warm_cache_note(environ) -> str | None:
    """Why a compile time may include cache hits: JAX compiles from scratch in every process unless its
    persistent compilation cache is on (JAX_COMPILATION_CACHE_DIR or jax_compilation_cache_dir)."""
    import sys

    jax_module = sys.modules.get("jax")
    folder = environ.get("JAX_COMPILATION_CACHE_DIR") or (
        getattr(jax_module.config, "jax_compilation_cache_dir", None) if jax_module is not None else None)
    return f"compile_s may include hits of JAX's persistent compilation cache ({folder})" if folder else None
