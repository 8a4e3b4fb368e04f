"""FLOPs and bytes of a jitted JAX function from XLA's own cost analysis of the compiled program.

"bytes accessed" is XLA's count over the optimised HLO (after fusion): the operands read and the
outputs written by each fused kernel, so it is the traffic of what really runs, without the caches'
reuse between kernels. Some platforms give no cost analysis; then the figures are None.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax


def cost_analysis(fn: Callable[..., Any], *args: Any) -> dict[str, float | None]:
    """{"flops": ..., "bytes_accessed": ...} of ``jax.jit(fn)`` compiled for ``args`` (None where XLA
    gives no figure)."""
    compiled = jax.jit(fn).lower(*args).compile()
    try:
        costs = compiled.cost_analysis()
    except Exception:  # noqa: BLE001 - not every backend implements cost analysis
        costs = None
    if isinstance(costs, (list, tuple)):   # older jax: one dict per computation
        costs = costs[0] if costs else None
    costs = costs or {}
    flops, moved = costs.get("flops"), costs.get("bytes accessed")
    return {"flops": float(flops) if flops else None, "bytes_accessed": float(moved) if moved else None}


def step_bytes_per_sample(compiled: Any, global_batch: int, flops_per_sample: float | None) -> float | None:
    """Bytes one sample of a compiled train / predict step moves ("bytes accessed" / batch), for the
    roofline. None when XLA gives no figure, or when its FLOP count is under half the analytic one: XLA
    counts a loop's (scan's) body once, so its bytes would be under-counted too and the intensity
    overstated (``step_bytes_unknown`` says which)."""
    return _step_bytes(compiled, global_batch, flops_per_sample)[0]


def step_bytes_unknown(compiled: Any, global_batch: int, flops_per_sample: float | None) -> str | None:
    """Why step_bytes_per_sample is None, in a few words (None when it is known): the roofline says it
    for each case it cannot place."""
    return _step_bytes(compiled, global_batch, flops_per_sample)[1]


def _step_bytes(compiled: Any, global_batch: int, flops_per_sample: float | None) -> tuple[float | None, str | None]:
    try:
        costs = compiled.cost_analysis()
    except Exception:  # noqa: BLE001 - not every backend implements cost analysis
        return None, "XLA gives no cost analysis on this platform"
    if isinstance(costs, (list, tuple)):
        costs = costs[0] if costs else None
    costs = costs or {}
    moved, flops = costs.get("bytes accessed"), costs.get("flops")
    if not moved or not global_batch:
        return None, "XLA's cost analysis counts no bytes for this step"
    if flops_per_sample and (not flops or flops / global_batch < 0.5 * flops_per_sample):
        return None, ("XLA counts a loop's (scan's) body once, so its bytes would be under-counted "
                      "(its FLOPs are under half the analytic count)")
    return float(moved) / global_batch, None
