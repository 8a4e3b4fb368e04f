"""`xpubench list`: the workloads with their defaults, and the backends."""

from __future__ import annotations

from rich.table import Table

from xpubench.plan import MATMUL_SIZES, backend_ids, default_batch_sizes
from xpubench.workloads import get_workload, names


def print_listing(console) -> None:
    t = Table(title="Workloads", caption="GFLOP: per training sample, forward and backward; a workload that "
              "generates by default (llama) shows its generation batch sizes and no training columns")
    for col in ("name", "what", "dataset", "batch sizes", "epochs", "train / eval samples", "GFLOP"):
        # names are never cut (a user types them); descriptions wrap; a cell too long for its column folds
        t.add_column(col, no_wrap=col in ("name", "dataset"), overflow="fold")
    for name in names():   # the models (with a spec), after the N x N products; not the selftest
        workload = get_workload(name)
        s = workload.spec
        if workload.kind == "matmul":
            t.add_row(name, workload.title, "-", "N = " + ", ".join(map(str, MATMUL_SIZES)), "-", "-", "2N³")
        elif s is not None and "train" not in workload.default_modes:   # llama: generation by default
            t.add_row(name, _what(workload), s.dataset, _batches(workload, "generate"), "-", "-", "-")
        elif s is not None:
            t.add_row(name, _what(workload), s.dataset, _batches(workload, "train"), str(s.epochs),
                      f"{s.train_samples:,} / {s.eval_samples:,}",
                      f"{workload.forward_flops(s) * s.train_flops_factor / 1e9:.3f}")
    console.print(t)
    console.print("backends: " + ", ".join(backend_ids()) + "   (see `xpubench env` for what is installed here)")


def _what(workload) -> str:
    """The title; for a generative workload its generation's default lengths and batch sizes; the choices
    of its own flags (gpt's and llama's --preset)."""
    s = workload.spec
    parts = [s.title]
    if workload.generates and workload.generation_lengths is not None:
        prompt_len, new_tokens = workload.generation_lengths(s, {})
        parts.append(f"--mode infer{' (its default)' if 'infer' in workload.default_modes else ''}: generation, "
                     f"prompt {prompt_len} + {new_tokens} new, batch {_batches(workload, 'generate')}")
        if "train" not in workload.default_modes:
            parts.append(f"--mode train: batch {_batches(workload, 'train')}, {s.epochs} epoch(s) of "
                         f"{s.train_samples:,} samples")
    parts += [f"{row.flag} {', '.join(row.choices)}" for row in workload.options if row.flag and row.choices]
    return "; ".join(parts)


def _batches(workload, mode: str) -> str:
    """The batch sizes a run plans for the workload's cases of ``mode`` on a CPU (plan/defaults.py)."""
    return ", ".join(map(str, default_batch_sizes(workload, workload.spec, mode)))
