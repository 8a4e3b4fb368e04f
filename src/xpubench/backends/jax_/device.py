"""Device lookup, synchronisation and placement for JAX."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from xpubench.errors import UserError

DTYPES = {"fp32": jnp.float32, "tf32": jnp.float32, "bf16": jnp.bfloat16, "fp16": jnp.float16}
PLATFORM_KIND = {"cpu": "cpu", "gpu": "gpu", "cuda": "gpu", "rocm": "gpu", "tpu": "tpu"}


def kind_of(device) -> str:
    return PLATFORM_KIND.get(device.platform, device.platform)


def jax_devices(device_id: str, count: int = 1) -> list:
    """The first ``count`` JAX devices of the kind named by ``device_id``; refuses, never falls back."""
    kind, _, index = device_id.partition(":")
    found = [d for d in jax.devices(_platform(kind)) if kind_of(d) == kind] if _has(kind) else []
    start = int(index or 0)
    if len(found) < start + count:
        raise UserError(f"device {device_id} x{count} is not available to jax (found {len(found)} {kind})")
    return found[start:start + count]


def _platform(kind: str) -> str | None:
    return None if kind == "gpu" else kind


def _has(kind: str) -> bool:
    try:
        if kind == "gpu":
            return any(kind_of(d) == "gpu" for d in jax.devices())
        return bool(jax.devices(kind))
    except RuntimeError:
        return False


def placement(array) -> str:
    devices = sorted(array.devices(), key=lambda d: d.id)
    kinds = {kind_of(d) for d in devices}
    kind = kinds.pop() if len(kinds) == 1 else "mixed"
    if kind == "cpu" and len(devices) == 1:
        return "cpu"
    if len(devices) == 1:
        return f"{kind}:{devices[0].id}"
    return f"{kind}:{devices[0].id}..{devices[-1].id} ({len(devices)} devices)"


def peak_memory_bytes(device) -> int | None:
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    if stats and "peak_bytes_in_use" in stats:
        return int(stats["peak_bytes_in_use"])
    if device.platform == "cpu":
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    return None
