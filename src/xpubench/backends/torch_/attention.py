"""Which ``scaled_dot_product_attention`` kernel PyTorch actually ran.

``F.scaled_dot_product_attention`` is a composite op: at call time it picks one implementation (among
those ``torch.nn.attention.sdpa_kernel`` leaves enabled) and dispatches to its own aten op, whose name
says which it is. ``sdpa_kernels(fn)`` runs ``fn`` once under ``torch.profiler`` (CPU activity only:
the aten ops are recorded on the host whatever the device) and returns the kernels seen. Call it once,
outside every timed region, on the same inputs, precision (autocast) and grad mode as the measured
calls: the choice depends on the device, dtype, shapes, mask and whether gradients are needed. The
profiler may print two ``profiler_start/stop`` lines to stderr (Kineto's logging).

Under ``torch.compile`` the request is not binding: Inductor pattern-matches attention and puts its
own SDPA call back (measured on the CPU, torch 2.13: a model asking for ``math`` inside its forward ran
the flash kernel once compiled; with the math path decomposed into plain ops no SDPA op runs at all).
So ``checked_kernel`` records what the model runs *as it will be measured* (compiled or not) and
refuses anything but the kernel asked for.

Why not ``torch.backends.cuda.can_use_flash_attention(params)`` and friends: they answer for one
kernel on CUDA only, and replaying torch's priority order would duplicate (and drift from) its logic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch.profiler import ProfilerActivity, profile

# aten op -> kernel, the names of xpubench.workloads.gpt.TORCH_ATTENTION
KERNEL_OPS = {
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash",     # the CPU's flash-style kernel
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_attention_math_for_mps": "math",
    "aten::_scaled_dot_product_fused_attention_overrideable": "overrideable",   # out-of-tree devices
}


def sdpa_kernels(fn: Callable[[], Any]) -> str | None:
    """Run ``fn()`` once and return the attention kernel(s) its SDPA calls ran, e.g. "flash" (several
    joined with "+", sorted), or None when it ran no SDPA op."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    seen = {KERNEL_OPS[e.name] for e in prof.events() if e.name in KERNEL_OPS}
    return "+".join(sorted(seen)) or None


def checked_kernel(requested: str, fn: Callable[[], Any]) -> str:
    """The kernel ``fn()`` runs (``sdpa_kernels``), refusing with a RuntimeError one other than
    ``requested`` (a name of ``TORCH_ATTENTION``; "auto" accepts any). "compiled" when no SDPA op ran
    (a compiled model whose attention became generated code): accepted for "auto" only."""
    ran = sdpa_kernels(fn) or "compiled"
    if requested != "auto" and ran != requested:
        raise RuntimeError(f"attention kernel {requested!r} was asked for, but {ran!r} ran "
                           "(torch.compile may replace the kernel: run it eager)")
    return ran
