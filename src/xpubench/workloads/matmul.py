"""The matmul workload: N x N products (no model). The measuring loop and the adapters a backend supplies
(MatmulOps) are harness/matmul.py's; this module says what the workload is. Every backend runs it (its
``matmul_ops``), numpy included: the planner gives it its own cases (sizes and matmul dtypes)."""

from __future__ import annotations

from xpubench.workloads.base import Workload

TITLE = "N x N matrix multiply"


def flops(n: int) -> float:
    """FLOPs of one N x N product: N^3 multiply-adds, 2 FLOPs each."""
    return 2.0 * n**3


WORKLOAD = Workload(name="matmul", title=TITLE, kind="matmul", sources=(__file__,), modes=("matmul",))
