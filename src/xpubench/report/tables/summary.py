"""The summary `xpubench run` prints first, in the shape of llama-bench's table: one row per workload x
test (matrix size, batch, a language model's pp and tg) x dtype, a column per backend/device holding its
headline figure ± half its 95% interval, then the fastest column and its ratio to the next one. Rows are
grouped by workload (matmul, training, inference, generation), columns no row fills are dropped, and every
mark a cell carries is defined under the table (``legend``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from xpubench.legible.units import fmt_rate
from xpubench.report.base.frame import ResultSet, benchmarks, many_sources
from xpubench.report.base.table import ALWAYS, Column, Table
from xpubench.report.tables import target
from xpubench.report.tables.headline import rate_groups
from xpubench.report.tables.llm import bound_cell
from xpubench.report.tables.summary_lines import Cell, Line, column_headers, summary_lines
from xpubench.report.tables.user_cost import Priced, compile_table, cost_table

NOISY, UNSURE, NOT_RUN = "!", "~", "-"

def _scaled(line: Line) -> tuple[str, float]:
    """The unit a line prints its figures in and the divisor: FLOP/s with the prefix of its largest figure."""
    if line.unit != "FLOP/s":
        return line.unit, 1.0
    top = max((c.value for c in line.cells.values() if c.value), default=0.0)
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if top >= scale:
            return f"{prefix}FLOP/s", scale
    return "FLOP/s", 1.0


def _number(value: float) -> str:
    return fmt_rate(value) if value >= 1 or value == 0 else f"{value:.3g}"


def _cell_text(cell: Cell | None, scale: float, target_row: bool) -> str:
    if cell is None:
        return NOT_RUN
    if cell.value is None:
        status = cell.row.get("status")
        if target_row and status == "ok":
            return "not reached"
        return str(status)
    figure = f"{cell.value:.1f}" if target_row else _number(cell.value / scale)
    text = f"{figure} {cell.spread}".strip()
    return text + (NOISY if cell.row.get("noisy") else "")


def _sample_spread(data: ResultSet | None, cell: Cell) -> str:
    """± half the 95% interval of the median of the samples ``cell.metric`` comes from (two-level bootstrap),
    "" unknown."""
    from xpubench.results.stats import two_level

    groups = [g for g in _groups(data, cell) if g.size]
    if not groups or sum(g.size for g in groups) < 3:
        return ""
    stats = two_level(groups)
    return f"±{(stats.ci95_high - stats.ci95_low) / 2 / stats.median:.0%}" if stats.median > 0 else ""


def _groups(data: ResultSet | None, cell: Cell) -> list[np.ndarray]:
    return rate_groups(data, cell.row, cell.metric) if data is not None else []


def _winner(line: Line, data: ResultSet | None) -> tuple[str, str, bool]:
    """(the fastest column, its ratio to the next one, whether the ratio is unsure: the 95% interval of the
    two-level bootstrap over processes and samples contains 1, or no interval); ("", "", False) with
    fewer than two figures."""
    from xpubench.results.ratio import ratio_estimate

    ranked = sorted(((col, c) for col, c in line.cells.items() if c.value), key=lambda item: item[1].value,
                    reverse=line.higher)
    if len(ranked) < 2:
        return (ranked[0][0] if ranked else ""), "", False
    (best, a), (_, b) = ranked[0], ranked[1]
    ratio = a.value / b.value if line.higher else b.value / a.value
    if target.is_target_row(a.row):
        return best, f"{ratio:.2f}x", False
    est = ratio_estimate(_groups(data, a), _groups(data, b))   # time of b over time of a: the figures' ratio
    return best, f"{ratio if est is None else est.ratio:.2f}x", est is None or not est.significant


def summary_table(frame: pd.DataFrame, data: ResultSet | None = None) -> Table:
    """The summary (module docstring) of ``frame``; ``data`` (the ResultSet the frame is of) gives the
    ratios their intervals."""
    rows = frame[benchmarks(frame)] if not frame.empty else frame
    lines = [li for li in summary_lines(rows) if not li.llm] if not rows.empty else []   # a language model: llm.py's
    rows = rows[rows.index.isin({cell.row.name for li in lines for cell in li.cells.values()})]
    columns, header, where = column_headers(rows) if lines else ([], {}, "")
    records, unsure_any, marks = [], False, set()
    finished = [li for li in lines if any(c.value is not None for c in li.cells.values())]
    unfinished, lines = len(lines) - len(finished), finished
    units = _group_units(lines)
    for i, line in enumerate(lines):
        for cell in line.cells.values():
            if cell.metric and cell.value is not None and not cell.spread:
                cell.spread = _sample_spread(data, cell)
        shown_unit, scale = units[line.workload]
        best, ratio, unsure = _winner(line, data)
        unsure_any |= unsure and bool(ratio)
        is_target = line.unit == "s to target"
        cells = {header[c]: _cell_text(line.cells.get(c), scale, is_target) for c in columns}
        marks |= {m for text in cells.values() for m in (NOISY, NOT_RUN) if text.endswith(m)}
        first = i == 0 or lines[i - 1].workload != line.workload
        share = bound_cell(line.cells[best].row) if line.tg and best else ""
        records.append({"workload": f"{line.workload} {shown_unit}" if first else "", "test": line.test,
                        "dtype": line.dtype, **cells, "fastest": header.get(best, "") if len(columns) > 1 else "",
                        "ratio": ratio + (UNSURE if unsure and ratio else ""), "of bw bound": share})
    table_rows = pd.DataFrame(records)
    kept = [name for name in table_rows.columns if (table_rows[name].astype(str) != "").any()] if records else []
    wrapping = ("workload", "test", "fastest", "of bw bound")   # the figures keep their width, these wrap
    cols = [Column(name, lambda r, name=name: str(r[name]), priority=ALWAYS, whole=name not in wrapping,
                   text=name in ("workload", "test", "dtype", "fastest")) for name in kept]
    title = (f"Summary{where}: median ± half its 95% interval, per "
             f"{'results file (machine) and ' if many_sources(rows) else ''}backend")
    note = legend(marks, unsure_any, "of bw bound" in kept)
    if unfinished:
        note += f"\n{unfinished} more row(s) had no case that finished: the answer says why"
    return Table(title, cols, table_rows, note=note, compact=True)


def paid_tables(frame: pd.DataFrame) -> list[Table]:
    """The summary's rows again as what their figures cost the user (report/tables/user_cost.py): the
    compile each worker process paid, with its break-even, where any case compiled apart; the dollars per
    the row's unit where a price was given. Each left out (empty) where it has nothing to show."""
    rows = frame[benchmarks(frame)] if not frame.empty else frame
    lines = [li for li in (summary_lines(rows) if not rows.empty else [])
             if any(c.value is not None for c in li.cells.values())]
    header = column_headers(rows)[1] if lines else {}
    shown = [(line.workload, line.test, line.dtype, line.unit if line.higher else "",
              [Priced(header[c], cell.row, cell.value, cell.metric == "prefill_tokens_per_s")
               for c, cell in line.cells.items() if cell.value is not None]) for line in lines]
    return [t for t in (compile_table(shown, list(header.values())), cost_table(shown, list(header.values())))
            if not t.empty]


def _group_units(lines: list[Line]) -> dict[str, tuple[str, float]]:
    """Per workload: the unit its rows print in and the divisor (FLOP/s with the prefix of its largest)."""
    out: dict[str, tuple[str, float]] = {}
    for line in lines:
        unit, scale = _scaled(line)
        if line.workload not in out or scale > out[line.workload][1]:
            out[line.workload] = (unit, scale)
    return out


def legend(marks: set[str], unsure: bool, bound: bool) -> str:
    """What the table's marks mean, one line each: only the marks it carries."""
    lines = [("figure: the work over the median of the worker processes' median times (a tg step: a round's mean "
              "step), so a ratio of two figures is the inverse ratio of their times"),
             ("± half the 95% interval of that median as a share of it (processes, then samples; a figure of one "
              "process: its samples only)"), "fastest: the column with the best figure; ratio: it against the next"]
    if NOISY in marks:
        lines.append(f"{NOISY} noisy: the processes disagree or the samples vary by 10% or more "
                     "(`xpubench run --verbose` says which)")
    if unsure:
        lines.append(f"{UNSURE} not significant: the 95% interval of the ratio contains 1 (or has too few samples)")
    if NOT_RUN in marks:
        lines.append(f"{NOT_RUN} not run: that backend has no such case")
    if bound:
        lines.append("of bw bound: the fastest tg against the decode rate its memory bandwidth allows "
                     "(weights and KV cache read once per token)")
    return "\n".join(lines)


def ceiling_note(data: ResultSet) -> str | None:
    """Once for the run: the FLOP/s ceilings it has no measured figure for (the "% of ceiling" figures are
    n/a there) and the command that measures them; None when none is missing."""
    missing: dict[str, None] = {}
    for entry in data.items:
        for key in ((entry.result.fingerprint or {}).get("ceilings") or {}).get("missing") or []:
            missing.setdefault(str(key).split(":")[0])
    if not missing:
        return None
    listed = list(missing)
    said = ", ".join(listed[:4]) + (f" and {len(listed) - 4} more" if len(listed) > 4 else "")
    return (f"FLOP/s ceilings not measured on this machine ({said}), so no figure is ranked against one: "
            "`xpubench ceilings` measures them once (about 30 s per precision on a CPU) for the runs after it; "
            "`xpubench run --measure-ceilings` does so before its cases")
