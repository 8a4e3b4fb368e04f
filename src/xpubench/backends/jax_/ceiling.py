"""JAX's pieces for the ceilings: matmul inputs of any M x K x N shape (the same jitted product as the
matmul workload; each new shape compiles on its first call, which the search does not time) and
STREAM-like kernels.

XLA has no in-place kernel outside a loop: a jitted ``b + s * c`` returns a fresh output every call,
and on a CPU a fresh 100+ MB buffer is page-faulted in at every call (measured: 2.6 GB/s where the
same kernel in a loop runs 14 GB/s). So each call runs the kernel ``LOOP`` times in one
``lax.fori_loop``, where XLA updates the loop carry in place, and each kernel feeds on the previous
iteration's result so that XLA cannot hoist it out of the loop:

* copy:  x <- x * s with s = 1.0 passed at run time (a pure copy in a loop is a no-op XLA removes;
  multiplying by a run-time scalar moves the same bytes: read x, write x): 2 transfers per iteration.
* triad: x <- b + s * x (read b and x, write x): 3 transfers per iteration.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from xpubench.backends.jax_.device import DTYPES, jax_devices, kind_of, placement
from xpubench.backends.jax_.matmul import TOLERANCE, product_fn
from xpubench.harness import bandwidth
from xpubench.harness.ceiling import GemmOps, shaped_inputs_numpy
from xpubench.harness.matmul import MatmulOps

LOOP = 8
TRIAD_SCALAR = 0.5


def gemm_ops(device_id: str, precision: str, seed: int = 0) -> GemmOps:
    (device,) = jax_devices(device_id)
    dtype = DTYPES[precision]

    def make_inputs(m: int, k: int, n: int):
        a, b = shaped_inputs_numpy(m, k, n, seed)
        a, b = jax.device_put(a.astype(dtype), device), jax.device_put(b.astype(dtype), device)
        return a.block_until_ready(), b.block_until_ready()

    ops = MatmulOps(
        make_inputs=lambda n: make_inputs(n, n, n), product=jax.jit(product_fn(precision)),
        sync=lambda out: out.block_until_ready(),
        to_numpy=lambda x: np.asarray(x.astype(jnp.float32), dtype=np.float64), placement=placement,
        tolerance=TOLERANCE[precision])
    return GemmOps(ops, make_inputs, element_bytes=jnp.dtype(dtype).itemsize, memory_bytes=_free_memory(device))


def _free_memory(device) -> int | None:
    if not kind_of(device).accelerator:
        return bandwidth.available_memory_bytes()
    try:
        stats = device.memory_stats() or {}
    except Exception:  # noqa: BLE001 - not every platform has memory_stats
        return None
    return stats["bytes_limit"] - stats.get("bytes_in_use", 0) if "bytes_limit" in stats else None


def stream_ops(device_id: str, array_bytes: int | None = None) -> bandwidth.StreamOps:
    (device,) = jax_devices(device_id)
    if array_bytes is None:
        cpu = not kind_of(device).accelerator
        array_bytes = bandwidth.array_bytes_for(bandwidth.llc_bytes() if cpu else None,
                                                bandwidth.available_memory_bytes() if cpu else None,
                                                accelerator=not cpu)
    n = array_bytes // 4
    b = jax.device_put(np.full(n, 2.0, np.float32), device)
    x0 = jax.device_put(np.full(n, 1.0, np.float32), device)
    one, half = (jax.device_put(np.float32(v), device) for v in (1.0, TRIAD_SCALAR))
    scale_loop = jax.jit(lambda x, s: jax.lax.fori_loop(0, LOOP, lambda i, y: y * s, x))
    triad_loop = jax.jit(lambda x, b, s: jax.lax.fori_loop(0, LOOP, lambda i, y: b + s * y, x))
    out = {}

    def copy():
        out["copy"] = scale_loop(x0, one)
        return out["copy"]

    def triad():
        out["triad"] = triad_loop(x0, b, half)
        return out["triad"]

    def sample(x) -> np.ndarray:
        return np.asarray(jnp.concatenate([x[:: bandwidth.CHECK_STRIDE], x[-1:]]))

    def triad_expected() -> np.ndarray:
        y, bs = sample(x0), sample(b)
        for _ in range(LOOP):
            y = bs + np.float32(TRIAD_SCALAR) * y
        return y

    kernels = {
        "copy": bandwidth.Kernel(copy, 2 * LOOP, lambda: bandwidth.mismatch(sample(out["copy"]), sample(x0)),
                                 f"x = s*x with s = 1.0 at run time, {LOOP}x in one jitted fori_loop"),
        "triad": bandwidth.Kernel(triad, 3 * LOOP, lambda: bandwidth.mismatch(sample(out["triad"]), triad_expected()),
                                  f"x = b + s*x, {LOOP}x in one jitted fori_loop"),
    }
    return bandwidth.StreamOps(kernels, sync=lambda result: result.block_until_ready(), array_bytes=n * 4)
