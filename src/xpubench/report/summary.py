"""The compact summary `xpubench run` prints first: one row per case with its headline figure, the
figure's spread and its ratio to the best case of the same workload in the same file; short headers, and
the least important columns dropped on a narrow terminal (report/table_model.py)."""

from __future__ import annotations

import pandas as pd

from xpubench.report import related, target
from xpubench.report.table_model import ALWAYS, Column, Table
from xpubench.report.tables import noisy, num
from xpubench.units import fmt_flops, fmt_rate

# the headline rate per mode (higher is better), the first one a result has: token models train in tokens
HEADLINE_RATE = {"matmul": ("warm_flops_per_s",), "train": ("tokens_per_s", "samples_per_s"),
                 "infer": ("samples_per_s",), "generate": ("decode_tokens_per_s",)}
UNIT = {"tokens_per_s": " tok/s", "decode_tokens_per_s": " tok/s", "samples_per_s": " samples/s"}


def headline_name(row) -> str | None:
    names = HEADLINE_RATE.get(str(row.get("mode")), ())
    return next((n for n in names if num(row, n) is not None), None)


def headline_rate(row) -> float | None:
    """The case's headline figure as a rate (higher is better): FLOP/s for matmul, tokens/s for a token
    model's training and for generation (decode), else samples/s."""
    name = headline_name(row)
    return num(row, name) if name and row.get("status") == "ok" else None


def figure(row) -> str:
    if row.get("status") != "ok":
        return str(row.get("status"))
    if target.is_target_row(row):   # a quality target: the time to it, or "not reached" (report/target.py)
        return target.summary_figure(row)   # (no "!": the harness's flags are about its steps' spread)
    rate, name = headline_rate(row), headline_name(row)
    text = fmt_flops(rate) if row.get("mode") == "matmul" else \
        "n/a" if rate is None else fmt_rate(rate) + UNIT.get(name, "")
    return noisy(row, text)


def spread(row) -> str:
    """Half the 95% interval of the headline time over its median (the two-level bootstrap), else half
    the samples' IQR over their median; "-" when neither is known."""
    timing = row.get("timing")
    if row.get("status") != "ok" or not isinstance(timing, str):
        return "-"
    if target.is_target_row(row):   # the bootstrap interval of the time to target, over the seeds
        return target.summary_spread(row)
    prefix = timing[:-2]
    median, low, high = num(row, timing), num(row, f"{prefix}_ci95_low_s"), num(row, f"{prefix}_ci95_high_s")
    if median and low is not None and high is not None:
        return f"±{(high - low) / 2 / median:.0%}"
    iqr = num(row, f"{prefix}_iqr_s")
    return f"±{iqr / 2 / median:.0%} IQR" if median and iqr is not None else "-"


def versus_best(frame: pd.DataFrame):
    """The "vs best" cell: the row's rate over the fastest case of the same workload, mode and precision
    in its file (an fp32 case is never put against a bf16 one). Where the workload ran in several
    precisions the best of each says which ("best fp32")."""
    def cell(row) -> str:
        if target.is_target_row(row):   # against the fastest to the same target (report/target.py)
            return target.versus_best(frame, row)
        rate = headline_rate(row)
        if rate is None:
            return "-"
        rates = [headline_rate(r) for _, r in related.workload_rows(frame, row).iterrows()]
        best = max((r for r in rates if r), default=None)
        if not best:
            return "n/a"
        if rate >= best:
            mixed = related.workload_rows(frame, row, same_precision=False)["precision"].nunique() > 1
            return f"best {row.get('precision')}" if mixed else "best"
        share = rate / best
        return f"{share:.2f}x" if share >= 0.1 else f"{share:.2g}x"
    return cell


COST = ("usd_per_1m_samples", "usd_per_1m_predictions")   # training samples / predictions (cost.py)


def cost(row) -> str:
    """$ per 1M training samples (train) or predictions (infer), from --price-per-hour; "-" unpriced."""
    value = next((num(row, name) for name in COST if num(row, name) is not None), None)
    return "-" if value is None else (f"${value:,.4f}" if value < 1 else f"${value:,.2f}")


def what(row) -> str:
    if row.get("mode") == "matmul" and pd.notna(row.get("size")):
        return f"N={int(row['size'])}"
    if pd.isna(row.get("batch_size")):
        return "-"
    devices = int(row.get("devices") or 1)
    return f"b{int(row['batch_size'])}" + (f"x{devices}" if devices > 1 else "")


def summary_table(frame: pd.DataFrame) -> Table:
    rows = frame[frame["workload"] != "selftest"] if not frame.empty else frame
    cols = [Column("workload", lambda r: str(r["workload"]), text=True),
            Column("mode", lambda r: str(r["mode"]), text=True, priority=3),
            Column("backend", lambda r: str(r["backend"]), text=True),
            Column("device", lambda r: str(r["device"]), text=True),
            Column("dtype", lambda r: str(r["precision"]), text=True, priority=2),
            Column("size", what, priority=1),
            Column("figure", figure, priority=ALWAYS),
            Column("±95%", spread, priority=1),
            Column("vs best", versus_best(frame), priority=ALWAYS)]
    if any(name in rows and rows[name].notna().any() for name in COST):   # priced: --price-per-hour
        cols.append(Column("$ per 1M", cost, priority=1))
    return Table("Summary (vs best: against the fastest of the same workload and precision)", cols, rows)
