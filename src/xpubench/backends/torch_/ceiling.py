"""torch's pieces for the ceilings: matmul inputs of any M x K x N shape (the same product, sync and
precision settings as the matmul workload) and STREAM copy / triad (``Tensor.copy_`` and one fused
``torch.add(b, c, alpha=s, out=a)``), on the CPU or a GPU."""

from __future__ import annotations

import numpy as np
import torch

from xpubench.backends.torch_.device import DTYPES, placement, set_precision_mode, sync, torch_device
from xpubench.backends.torch_.matmul import TOLERANCE
from xpubench.harness import bandwidth
from xpubench.harness.ceiling import GemmOps, shaped_inputs_numpy
from xpubench.harness.matmul import MatmulOps

SCALAR = 3.0


def gemm_ops(device_id: str, precision: str, seed: int = 0) -> GemmOps:
    device = torch_device(device_id)
    set_precision_mode(precision)
    dtype = DTYPES[precision]

    def make_inputs(m: int, k: int, n: int):
        a, b = shaped_inputs_numpy(m, k, n, seed)
        a, b = torch.from_numpy(a).to(device, dtype), torch.from_numpy(b).to(device, dtype)
        sync(device)
        return a, b

    ops = MatmulOps(
        make_inputs=lambda n: make_inputs(n, n, n), product=torch.matmul, sync=lambda out: sync(device),
        to_numpy=lambda t: t.detach().float().cpu().numpy().astype(np.float64), placement=placement,
        tolerance=TOLERANCE[precision])
    free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else (
        bandwidth.available_memory_bytes() if device.type == "cpu" else None)
    return GemmOps(ops, make_inputs, element_bytes=torch.empty((), dtype=dtype).element_size(), memory_bytes=free)


def default_array_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        free, _ = torch.cuda.mem_get_info(device)
        return bandwidth.array_bytes_for(getattr(props, "L2_cache_size", None), free, accelerator=True)
    if device.type == "cpu":
        return bandwidth.array_bytes_for(bandwidth.llc_bytes(), bandwidth.available_memory_bytes())
    return bandwidth.array_bytes_for(None, None, accelerator=True)


def stream_ops(device_id: str, array_bytes: int | None = None) -> bandwidth.StreamOps:
    device = torch_device(device_id)
    n = (array_bytes or default_array_bytes(device)) // 4
    a, b, c = (torch.full((n,), v, dtype=torch.float32, device=device) for v in (1.0, 2.0, 0.5))
    sync(device)

    def sample(x: torch.Tensor) -> np.ndarray:
        return torch.cat([x[:: bandwidth.CHECK_STRIDE], x[-1:]]).cpu().numpy()

    kernels = {
        "copy": bandwidth.Kernel(lambda: c.copy_(a), 2, lambda: bandwidth.mismatch(sample(c), sample(a)),
                                 "c = a (Tensor.copy_)"),
        "triad": bandwidth.Kernel(lambda: torch.add(b, c, alpha=SCALAR, out=a), 3,
                                  lambda: bandwidth.mismatch(sample(a), sample(b) + np.float32(SCALAR) * sample(c)),
                                  "a = b + s*c (torch.add(b, c, alpha=s, out=a): one fused kernel)"),
    }
    return bandwidth.StreamOps(kernels, sync=lambda out: sync(device), array_bytes=n * 4)
