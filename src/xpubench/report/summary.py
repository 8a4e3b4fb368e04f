"""The compact summary `xpubench run` prints first: one row per case with its headline figure, the
figure's spread and its ratio to the best case of the same workload in the same file; short headers, and
the least important columns dropped on a narrow terminal (report/table_model.py)."""

from __future__ import annotations

import pandas as pd

from xpubench.report import related, target
from xpubench.report.figures import shown
from xpubench.report.frame import num, row_mode, setting
from xpubench.report.llm import bound_cell
from xpubench.report.table_model import ALWAYS, Column, Table
from xpubench.report.tables import noisy
from xpubench.units import fmt_rate


def headline_name(row) -> str | None:
    """The metric of the row's headline figure (its mode's ``headline``, results/modes.py), or None."""
    mode = row_mode(row)
    figure = mode.headline_figure(row) if mode else None
    return figure.metric if figure else None


def headline_rate(row) -> float | None:
    """The case's headline figure (results/modes.py: FLOP/s for matmul, tokens/s for a token model's
    training and for generation (decode), else samples/s); None unless the case finished ok."""
    name = headline_name(row)
    return num(row, name) if name and row.get("status") == "ok" else None


def better(row) -> bool:
    """Whether a larger headline figure is the better one (results/modes.py ``higher_is_better``)."""
    mode = row_mode(row)
    return mode.higher_is_better if mode else True


def figure_text(row, value, *, named: bool = False) -> str:
    """A row's headline figure with its unit as the mode declares it (FLOP/s carries its own)."""
    mode = row_mode(row)
    figure = mode.headline_figure(row) if mode else None
    return shown(figure, value, named=named) if figure else "n/a" if value is None else fmt_rate(value)


def figure(row) -> str:
    if row.get("status") != "ok":
        return str(row.get("status"))
    if target.is_target_row(row):   # a quality target: the time to it, or "not reached" (report/target.py)
        return target.summary_figure(row)   # (no "!": the harness's flags are about its steps' spread)
    return noisy(row, figure_text(row, headline_rate(row)))


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
        pick = max if better(row) else min
        best = pick((r for r in rates if r), default=None)
        if not best:
            return "n/a"
        if pick(rate, best) == rate:
            mixed = related.workload_rows(frame, row, same_precision=False)["precision"].nunique() > 1
            return f"best {row.get('precision')}" if mixed else "best"
        share = rate / best if better(row) else best / rate
        return f"{share:.2f}x" if share >= 0.1 else f"{share:.2g}x"
    return cell


def cost_name(row) -> str | None:
    """The metric of the row's dollars per result (its mode's ``cost``: per 1M training samples or
    predictions, from --price-per-hour), None for a mode that is not priced."""
    mode = row_mode(row)
    return mode.cost.metric if mode and mode.cost else None


def cost(row) -> str:
    """$ per 1M training samples (train) or predictions (infer); "-" unpriced."""
    value = num(row, cost_name(row))
    return "-" if value is None else (f"${value:,.4f}" if value < 1 else f"${value:,.2f}")


def what(row) -> str:
    text = setting(row, short=True)
    if not text:
        return "-"
    devices = int(row.get("devices") or 1)
    return text + (f"x{devices}" if devices > 1 else "")


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
    if any(num(r, cost_name(r)) is not None for _, r in rows.iterrows()):   # priced: --price-per-hour
        cols.append(Column("$ per 1M", cost, priority=1))
    if any(num(r, "decode_bytes_per_token") is not None for _, r in rows.iterrows()):   # language models
        cols.append(Column("of bw bound", lambda r: bound_cell(r) if num(r, "decode_bytes_per_token") else "-",
                           priority=1))
    return Table("Summary (vs best: against the fastest of the same workload and precision)", cols, rows)
