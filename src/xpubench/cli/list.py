"""`xpubench list`: the workloads with their defaults, and the backends."""

from __future__ import annotations

from rich.table import Table

from xpubench.plan import MATMUL_SIZES, backend_ids
from xpubench.workloads import MODEL_WORKLOADS, TRANSFORMER_WORKLOADS, get_workload


def print_listing(console) -> None:
    t = Table(title="Workloads", caption="GFLOP: per training sample, forward and backward")
    for col in ("name", "what", "dataset", "batch sizes", "epochs", "train / eval samples", "GFLOP"):
        # names are never cut (a user types them); descriptions wrap; a cell too long for its column folds
        t.add_column(col, no_wrap=col in ("name", "dataset"), overflow="fold")
    t.add_row("matmul", "N x N matrix multiply", "-", "N = " + ", ".join(map(str, MATMUL_SIZES)), "-", "-", "2N³")
    for name in (*MODEL_WORKLOADS, *TRANSFORMER_WORKLOADS):
        mod = get_workload(name)
        s = mod.SPEC
        t.add_row(name, s.title, s.dataset, ", ".join(map(str, s.batch_sizes)), str(s.epochs),
                  f"{s.train_samples:,} / {s.eval_samples:,}",
                  f"{mod.forward_flops(s) * s.train_flops_factor / 1e9:.3f}")
    console.print(t)
    console.print("backends: " + ", ".join(backend_ids()) + "   (see `xpubench env` for what is installed here)")
