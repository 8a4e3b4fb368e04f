"""``xpubench doctor``'s adapters for JAX (doctor/probe.py): the benchmark's matmul adapters, an
allocation, the peak-memory counter and XLA's ahead-of-time compilation."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from xpubench.backends.base import DoctorOps
from xpubench.backends.jax_.device import PeakMemory, jax_devices, kind_of
from xpubench.backends.jax_.matmul import ops_for
from xpubench.case import Case
from xpubench.devices import memory


def _in_use(device) -> int | None:
    stats = device.memory_stats() if kind_of(device).accelerator else None
    return int(stats["bytes_in_use"]) if stats and "bytes_in_use" in stats else memory.host_current_bytes()


def compile_check(device) -> dict:
    """jax.jit(...).lower(...).compile() of a small function for the device, run and checked."""
    x = jax.device_put(np.linspace(-3, 3, 4096, dtype=np.float32), device)
    start = time.perf_counter()
    compiled = jax.jit(lambda v: jnp.sin(v) * 2 + 1).lower(x).compile()
    seconds = time.perf_counter() - start
    y = np.asarray(compiled(x))
    if not np.allclose(y, np.sin(np.asarray(x)) * 2 + 1, atol=1e-5):
        raise AssertionError("the compiled function's result is wrong")
    return {"what": "XLA (jax.jit ahead of time)", "seconds": seconds}


def doctor_ops(device_id: str) -> DoctorOps:
    (device,) = jax_devices(device_id)

    def allocate(n: int):
        held = jax.jit(lambda: jnp.ones((n,), jnp.uint8), out_shardings=jax.sharding.SingleDeviceSharding(device))()
        return held.block_until_ready()

    return DoctorOps(
        matmul=lambda p: ops_for(Case(workload="matmul", backend="jax", device=device_id, mode="matmul", precision=p)),
        asynchronous=True, allocate=allocate, memory_in_use=lambda: _in_use(device), peak=PeakMemory([device]),
        compile_check=lambda: compile_check(device))
