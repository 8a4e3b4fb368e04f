"""Bytes a torch computation moves, counted op by op, for the arithmetic intensity (FLOP per byte).

The count runs the function once under a ``TorchDispatchMode`` and adds, for every aten operator that
is not a view (``OpOverload.is_view``: t, view, expand, detach move nothing), the bytes of its tensor
inputs and of its outputs. That is the traffic of eager execution with no reuse between ops through
the caches: each op reads its inputs from memory and writes its outputs back. It is an analytic count,
not a hardware counter (the profiler has none on a CPU): fusing ops (torch.compile) or a cache that
holds an activation for the next op moves less. A tensor that is a broadcast view counts at most the
bytes of its storage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


def _bytes(t: torch.Tensor) -> int:
    logical = t.numel() * t.element_size()
    try:
        return min(logical, t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):   # tensors without storage (e.g. some wrappers)
        return logical


class _ByteCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.total = 0
        self.per_op: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not getattr(func, "is_view", False):
            tensors = [t for t in tree_flatten((args, kwargs or {}, out))[0] if isinstance(t, torch.Tensor)]
            moved = sum(_bytes(t) for t in tensors)
            self.total += moved
            name = str(func.overloadpacket)
            self.per_op[name] = self.per_op.get(name, 0) + moved
        return out


def bytes_accessed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
    """(total bytes, bytes per aten op name) moved by one call of ``fn(*args, **kwargs)``."""
    counter = _ByteCounter()
    with counter:
        fn(*args, **kwargs)
    return counter.total, dict(counter.per_op)
