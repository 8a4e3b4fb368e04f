"""numpy's pieces for the ceilings: matmul inputs of any M x K x N shape, and STREAM copy / triad.

numpy runs element-wise kernels on one thread, so its bandwidth is one core's; torch and JAX use
every core. Its triad is done in cache-sized blocks (``TRIAD_BLOCK`` elements): the product s * c of a
block stays in cache, so memory sees b and c read and a written once, 3 array transfers, as counted.
"""

from __future__ import annotations

import numpy as np

from xpubench.devices.device import is_cpu
from xpubench.errors import UserError
from xpubench.harness import bandwidth
from xpubench.harness.ceiling import GemmOps, shaped_inputs_numpy
from xpubench.harness.matmul import MatmulOps

TRIAD_BLOCK = 128 * 1024      # fp32 elements: a 512 KiB temporary, within a per-core L2
SCALAR = np.float32(3.0)


def gemm_ops(device: str, precision: str, seed: int = 0) -> GemmOps:
    if not is_cpu(device) or precision != "fp32":
        raise UserError(f"numpy runs fp32 on the cpu only (asked: {precision} on {device})")
    ops = MatmulOps(
        make_inputs=lambda n: shaped_inputs_numpy(n, n, n, seed), product=np.matmul, sync=lambda out: None,
        to_numpy=lambda x: np.asarray(x, dtype=np.float64), placement=lambda out: "cpu", tolerance=1e-4)
    return GemmOps(ops, lambda m, k, n: shaped_inputs_numpy(m, k, n, seed), element_bytes=4,
                   memory_bytes=bandwidth.available_memory_bytes())


def stream_ops(device: str, array_bytes: int | None = None) -> bandwidth.StreamOps:
    if not is_cpu(device):
        raise UserError(f"numpy runs on the cpu only (asked: {device})")
    size = array_bytes or bandwidth.array_bytes_for(bandwidth.llc_bytes(), bandwidth.available_memory_bytes())
    n = size // 4
    a, b, c = np.full(n, 1.0, np.float32), np.full(n, 2.0, np.float32), np.full(n, 0.5, np.float32)
    tmp = np.empty(min(n, TRIAD_BLOCK), np.float32)

    def copy():
        np.copyto(c, a)

    def triad():
        for i in range(0, n, TRIAD_BLOCK):
            part = tmp[: min(TRIAD_BLOCK, n - i)]
            np.multiply(c[i:i + TRIAD_BLOCK], SCALAR, out=part)
            np.add(b[i:i + TRIAD_BLOCK], part, out=a[i:i + TRIAD_BLOCK])

    def sample(x: np.ndarray) -> np.ndarray:
        return np.concatenate([x[::bandwidth.CHECK_STRIDE], x[-1:]])

    kernels = {
        "copy": bandwidth.Kernel(copy, 2, lambda: bandwidth.mismatch(sample(c), sample(a)),
                                 "c = a (np.copyto, one thread)"),
        "triad": bandwidth.Kernel(triad, 3, lambda: bandwidth.mismatch(sample(a), sample(b) + SCALAR * sample(c)),
                                  f"a = b + s*c in blocks of {TRIAD_BLOCK} elements (one thread)"),
    }
    return bandwidth.StreamOps(kernels, sync=lambda out: None, array_bytes=n * 4)
