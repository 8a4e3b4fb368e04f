"""Generation (greedy decoding with a KV cache, harness/generation.py) and token-model training in the
terminal and the reports (report/sections.py lists them): the generation table (prefill tokens/s, time to
first token, decode tokens/s, per-token latency p50/p90 per batch size) and the token models' training
table (tokens/s, MFU, the attention kernel that ran); the throughput-latency chart: report/charts/generation.py.
"""

from __future__ import annotations

import pandas as pd

from xpubench.report.base.cells import fmt, fmt_seconds
from xpubench.report.base.frame import backend_label, many_sources, num, ok_rows
from xpubench.report.base.table import ALWAYS, LOW, Column, Table
from xpubench.report.tables import llm

GENERATE = "generate"


def _pct(row, name: str) -> str:
    value = num(row, name)
    return "n/a" if value is None else f"{value:.2%}" + (" (est.)" if num(row, "peak_is_estimate") else "")


def _int(row, name: str) -> str:
    value = num(row, name)
    return "n/a" if value is None else str(int(value))


def _kernels(row) -> str:
    prefill, decode = num(row, "attention_kernel_prefill"), num(row, "attention_kernel_decode")
    if not prefill and not decode:
        return "n/a"
    return str(prefill) if prefill == decode else f"{prefill} / {decode}"


def generation_row(row) -> dict[str, str]:
    """One generation case as formatted cells (a frame row, or a dict of case fields and metrics)."""
    warn = " !" if num(row, "warning") else ""
    return {
        "workload": str(row["workload"]), "backend": backend_label(row), "device": str(row["device"]),
        "dtype": str(row["precision"]), "batch": _int(row, "batch_size"),
        "prompt + new": f"{_int(row, 'prompt_len')} + {_int(row, 'new_tokens')}",
        "compile": fmt_seconds(num(row, "compile_s")),
        "TTFT p50 / p90": f"{fmt_seconds(num(row, 'ttft_s'))} / {fmt_seconds(num(row, 'ttft_p90_s'))}",
        "prefill tok/s": fmt(num(row, "prefill_tokens_per_s"), ",.0f"),
        "decode tok/s": fmt(num(row, "decode_tokens_per_s"), ",.0f") + warn,
        "per-token p50 / p90": (f"{fmt_seconds(num(row, 'decode_token_p50_s'))} / "
                                f"{fmt_seconds(num(row, 'decode_token_p90_s'))}"),
        "end-to-end tok/s": fmt(num(row, "tokens_per_s"), ",.0f"),   # new tokens / the whole generation
        "MFU (decode)": _pct(row, "mfu"),
        "attention": _kernels(row),
    }


def token_training_row(row) -> dict[str, str]:
    """A token model's training case (gpt): the figures a language-model run is read by."""
    return {
        "workload": str(row["workload"]), "backend": backend_label(row), "device": str(row["device"]),
        "dtype": str(row["precision"]),
        "batch": _int(row, "batch_size") + (f" x{int(row['devices'])}" if row["devices"] > 1 else ""),
        "step p50": fmt_seconds(num(row, "step_s")),
        "tokens/s": fmt(num(row, "tokens_per_s"), ",.0f") + (" !" if num(row, "warning") else ""),
        "TFLOP/s": fmt(num(row, "achieved_flops_per_s"), ".3f", 1e-12),
        "MFU": _pct(row, "mfu"),
        "attention": str(num(row, "attention_kernel") or "n/a"),
        "loss": fmt(num(row, "final_loss"), ".4f"),
    }


# the columns a narrow terminal keeps longest (report/base/table.py drops the others right to left)
KEEP = ("workload", "backend", "dtype", "batch", "tokens/s", "decode tok/s", "TTFT p50 / p90")   # tokens/s: training


def _model(title: str, rows: pd.DataFrame, builder) -> Table:
    """A Table whose cells come from one of the row builders above (a file column first when the rows
    come from several files)."""
    names = list(builder(rows.iloc[0])) if not rows.empty else []
    cols = [Column("file", lambda r: str(r["source"]), priority=LOW, text=True)] if many_sources(rows) else []
    cols += [Column(name, lambda r, name=name: builder(r)[name], text=i < 4,
                    priority=ALWAYS if name in KEEP else (2 if i < 8 else LOW))
             for i, name in enumerate(names)]
    return Table(title, cols, rows)


def generation_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The ok generation rows this section shows: every one but a language model's at a real size (llama),
    which the "Language models" section shows in llama-bench's terms (report/tables/llm.py), never twice."""
    rows = ok_rows(frame, GENERATE)
    return rows[~rows.index.isin(llm.llm_rows(frame).index)] if not rows.empty else rows


def generation_table(frame: pd.DataFrame) -> Table:
    """Every generation case but a language model's (report/tables/llm.py), one row per batch size (empty when
    there is none)."""
    rows = generation_rows(frame)
    if not rows.empty:
        rows = rows.sort_values(["workload", "backend", "device", "precision", "batch_size"])
    return _model("Generation (greedy, KV cache): every case", rows, generation_row)


def token_training_table(frame: pd.DataFrame) -> Table:
    """Token models' training (tokens/s, MFU, attention kernel): what the terminal adds for them."""
    rows = ok_rows(frame, "train")
    if not rows.empty:
        rows = rows[rows["tokens_per_s"].notna()] if "tokens_per_s" in rows else rows.iloc[:0]
        rows = rows.sort_values(["workload", "backend", "device", "precision"])
    return _model("Token models, training: tokens/s = samples/s x context; MFU against the chip's peak", rows,
                  token_training_row)
