"""Efficiency, energy and cost: against the spec peak and the measured ceilings, joules and dollars per
result (analysis/ computes the figures when a file is loaded). Two tables, defined once for the terminal
(`xpubench run --verbose`) and the report (report/sections.py lists them):

* ``efficiency_table(frame)``: achieved FLOP/s of every ranked mode (results/modes.py) against the peak
  and the measured ceiling, arithmetic intensity, roofline;
* ``cost_energy_table(frame)``: dollars per result of every priced mode, joules and watts;
* ``peak_cell(...)``: the honest "% of peak" cell the other tables print: "above est. peak" instead of a
  number above 100% (analysis/efficiency.py).

What every row would say the same is said once, under the table (``fold``): a note clause shared by every
row, a column that is n/a in every row (with why). No local path (a home folder, ~/...) is printed: a
report is meant to be shared (``shareable``).
"""

from __future__ import annotations

import re

import pandas as pd

from xpubench.legible.units import fmt_flops
from xpubench.report.base.frame import many_sources, num, ok_rows, row_mode, setting
from xpubench.report.base.table import ALWAYS, LOW, Column, Table
from xpubench.results.modes import MODES


def usd(value) -> str:
    if value is None:
        return "n/a"
    return f"${value:.3g}" if value < 0.01 else (f"${value:,.4f}" if value < 1 else f"${value:,.2f}")


def _fmt(value, spec: str, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{unit}"


def peak_cell(row, name: str = "pct_of_peak") -> str:
    """The "% of peak" (or MFU) cell: the annotated label where there is one ("above est. peak" above an
    estimate), else the percentage, "(est.)" for a CPU estimate; n/a when unknown."""
    value, label = num(row, name), num(row, "peak_label")
    if value is None:
        return "n/a"
    if value > 1.0:
        return str(label) if label else ("above est. peak" if num(row, "peak_is_estimate") else "above spec peak")
    return f"{value:.1%}" + (" (est.)" if num(row, "peak_is_estimate") else "")


_LOCAL_PATH = re.compile(r"(?:~|/root|/home/[^/\s]+|/Users/[^/\s]+)(?:/[^\s)\]'\",;]*)?")


def shareable(text: str) -> str:
    """``text`` with home-folder paths (~/..., /root/..., /home/NAME/..., /Users/NAME/...) replaced."""
    return _LOCAL_PATH.sub("(a local path)", text)


def fold(table: pd.DataFrame, note_column: str | None = None, why_na: dict[str, str] | None = None
         ) -> tuple[pd.DataFrame, list[str]]:
    """(the table, sentences for its note): the ``note_column`` clauses ("; "-separated) that every row
    shares move to the note, and the column goes when no row keeps one; a column that is "n/a" in every
    row goes, said once with its reason from ``why_na`` (by column, else "unknown for every result")."""
    said: list[str] = []
    if table.empty:
        return table, said
    if note_column and note_column in table:
        rows = [[c for c in str(v).split("; ") if c] for v in table[note_column]]
        shared = [c for c in rows[0] if all(c in r for r in rows[1:])]
        said += shared
        table = table.assign(**{note_column: ["; ".join(c for c in r if c not in shared) for r in rows]})
        if not table[note_column].astype(bool).any():
            table = table.drop(columns=[note_column])
    empty = [c for c in table.columns if (table[c].astype(str) == "n/a").all()]
    reasons: dict[str, list[str]] = {}
    for name in empty:
        reasons.setdefault((why_na or {}).get(name, "unknown for every result"), []).append(name)
    said += [f"{', '.join(names)}: n/a for every result ({why}), so left out" for why, names in reasons.items()]
    return table.drop(columns=empty), [shareable(s) for s in said]


def fold_table(table: Table, note_column: str | None = None, why_na: dict[str, str] | None = None) -> Table:
    """``fold`` on a Table: the same rows and columns (their priorities kept), less the columns every row
    has n/a in; the note clauses every row shares move to the table's note."""
    if table.empty:
        return table
    cells = table.frame()
    folded, said = fold(cells, note_column, why_na)
    columns = [c for c in table.columns if c.header in folded.columns]
    if note_column in folded.columns:
        kept = dict(zip(table.rows.index, folded[note_column]))
        columns = [Column(c.name, lambda r, kept=kept: kept[r.name], c.unit, c.priority, c.text, c.group)
                   if c.header == note_column else c for c in columns]
    note = table.note + "".join(f" {s[0].upper()}{s[1:]}." for s in said)
    return Table(table.title, columns, table.rows, note.strip(), table.parts)


def _what(row) -> str:
    mode = row_mode(row)
    if mode and mode.size != "batch_size":
        return f"{row['mode']} {setting(row)}"
    batch = setting(row, short=True)
    return f"{row['workload']} {row['mode']}" + (f" {batch}" if batch else "")


def _identity(rows: pd.DataFrame) -> list[Column]:
    cols = [Column("file", lambda r: str(r["source"]), priority=LOW, text=True)] if many_sources(rows) else []
    return cols + [Column("case", _what, priority=ALWAYS, text=True),
                   Column("backend", lambda r: str(r["backend"]), priority=ALWAYS, text=True),
                   Column("device", lambda r: str(r["device"]), priority=2, text=True),
                   Column("dtype", lambda r: str(r["precision"]), priority=ALWAYS, text=True)]


def _flops(row):
    mode = row_mode(row)
    return mode.flops(row) if mode else None


def _share(row) -> str:
    mode = row_mode(row)
    return peak_cell(row, mode.peak_share) if mode and mode.peak_share else "n/a"


def _rows_of(frame: pd.DataFrame, **flag) -> pd.DataFrame:
    """The ok rows of the modes whose record sets ``flag`` (``ranked``, ``cost``: results/modes.py)."""
    rows = ok_rows(frame)
    names = [m.name for m in MODES.values() if getattr(m, next(iter(flag)))]
    return rows[rows["mode"].isin(names)] if not rows.empty else rows


EFFICIENCY_NOTE = (
    "% of peak: against the chip's dense peak (a CPU's is an estimate: cores x clock measured under load x "
    "FLOP/cycle; a result above it is ranked against the measured ceiling instead). % of ceiling: against the "
    "fastest matmul the ceiling search (`xpubench ceilings`) or this file measured for the same backend, "
    "device and precision; 'within noise' when the excess is inside both figures' 95% intervals.")
LOWER_BOUND_NOTE = (" ≥ and ≤: no ceiling was measured for that backend and precision, so the fastest matmul of "
                    "the same backend and precision in this file stands in: a lower bound of the ceiling, and "
                    "the % against it an upper bound.")
CEILING_AT_LEAST = "ceiling, at least"
ONLY_BOUNDS_NOTE = (" Ceiling, at least: no ceiling was measured (`xpubench ceilings` measures one), so the "
                    "fastest matmul of the same backend and precision in these files stands in for it; the real "
                    "ceiling is at least that, so the real % of ceiling is at most the one shown.")
MONEY_NOTE = ("$ from --price-per-hour / --prices and the steady throughput; energy read around the same timed "
              "windows as the throughput (RAPL, NVML, AMD SMI); n/a with the reason where nothing is readable.")


def _cpu_bases(rows: pd.DataFrame) -> str:
    """The CPU peak estimate's basis of the rows' files, said once (" CPU peak ...."), "" without one."""
    bases = {str(v) for v in rows.get("cpu_peak_basis", pd.Series(dtype=object)).dropna() if v}
    clocks = [float(c) for b in bases for c in _CLOCK.findall(b)]
    if len(bases) > 1 and len(clocks) == len(bases) and len({_CLOCK.sub("x {} GHz x", b) for b in bases}) == 1:
        # the same basis but for the clock each file measured: said once, with the clocks' range
        one = _CLOCK.sub(f"x {min(clocks):.2f}-{max(clocks):.2f} GHz x", min(bases), count=1)
        return f" CPU peak {one} (the clock as each of the {len(bases)} runs measured it)."
    return " CPU peak " + " / ".join(sorted(bases)) + "." if bases else ""


_CLOCK = re.compile(r"x ([\d.]+) GHz x")


def efficiency_table(frame: pd.DataFrame) -> Table:
    """Achieved FLOP/s of every ok result of a ranked mode against the spec peak and the measured ceiling."""
    rows = _rows_of(frame, ranked=True)
    rows = rows[[_flops(r) is not None for _, r in rows.iterrows()]] if not rows.empty else rows

    bounds = [bool(num(r, "ceiling_is_lower_bound")) for _, r in rows.iterrows() if num(r, "ceiling_flops_per_s")]
    only_bounds = bool(bounds) and all(bounds)   # no ceiling measured at all: the headers say "at least" once

    def ceiling(r) -> str:
        value = num(r, "ceiling_flops_per_s")
        return ("≥ " if num(r, "ceiling_is_lower_bound") and value and not only_bounds else "") + fmt_flops(value)

    def share_of_ceiling(r) -> str:
        label = str(num(r, "ceiling_label") or "n/a")
        return label.removeprefix("≤") if only_bounds else label

    cols = [*_identity(rows), Column("achieved", lambda r: fmt_flops(_flops(r)), priority=ALWAYS),
            Column("% of peak", _share, priority=1),
            Column(CEILING_AT_LEAST if only_bounds else "measured ceiling", ceiling, priority=2),
            Column("% of ceiling, at most" if only_bounds else "% of ceiling", share_of_ceiling, priority=1),
            Column("FLOP/byte", lambda r: _fmt(num(r, "arithmetic_intensity"), ",.1f"), priority=LOW),
            Column("roofline", lambda r: fmt_flops(num(r, "roofline_flops_per_s")), priority=LOW),
            Column("note", lambda r: str(num(r, "efficiency_note") or ""), priority=LOW, text=True)]
    note = EFFICIENCY_NOTE + _cpu_bases(frame)
    table = Table("Achieved FLOP/s against the spec peak and the measured ceiling", cols, rows, note)
    if only_bounds:
        table.note += ONLY_BOUNDS_NOTE
    elif not table.empty and any(str(ceiling(r)).startswith("≥") for _, r in rows.iterrows()):
        table.note += LOWER_BOUND_NOTE
    return fold_table(table, "note", WHY_NA)


def _energy(r) -> str:
    na = num(r, "energy_na")
    return f"n/a: {shareable(str(na).removeprefix('n/a: '))}" if na else str(num(r, "energy_source") or "n/a")


def cost_energy_table(frame: pd.DataFrame) -> Table:
    """Dollars per result of every ok result of a priced mode, with its energy."""
    rows = _rows_of(frame, cost=True)
    priced = [m for m in MODES.values() if m.cost is not None and (rows["mode"] == m.name).any()]
    cols = [*_identity(rows), Column("$/hour", lambda r: usd(num(r, "usd_per_hour")), priority=LOW),
            *(Column(f"$ per {m.cost.after}", lambda r, m=m: usd(num(r, m.cost.metric)), priority=1)
              for m in priced),
            Column("$ per epoch", lambda r: usd(num(r, "usd_per_epoch")), priority=LOW),
            Column("J/step", lambda r: _fmt(num(r, "joules_per_step"), ",.3g"), priority=LOW),
            Column("J/sample", lambda r: _fmt(num(r, "joules_per_sample"), ",.3g"), priority=2),
            Column("samples/J", lambda r: _fmt(num(r, "samples_per_joule"), ",.3g"), priority=LOW),
            Column("W", lambda r: _fmt(num(r, "average_watts"), ",.0f"), priority=LOW),
            Column("energy", _energy, priority=LOW, text=True)]
    table = Table("Cost and energy", cols, rows, MONEY_NOTE)
    reasons = {_energy(r) for _, r in rows.iterrows()}
    why = dict(WHY_NA, **{f"$ per {m.cost.after}": PRICE for m in priced})
    if len(reasons) == 1 and next(iter(reasons)).startswith("n/a: "):   # one reason for every row: said once
        why.update(dict.fromkeys(("J/step", "J/sample", "samples/J", "W", "energy"),
                                 next(iter(reasons)).removeprefix("n/a: ")))
        table.columns = [Column(c.name, lambda r: "n/a", priority=c.priority, text=True) if c.name == "energy"
                         else c for c in table.columns]
    folded = fold_table(table, None, why)
    if all(c.name in IDENTITY for c in folded.columns):   # not one figure known: a sentence, not a table
        return Table(folded.title, folded.columns, rows.iloc[:0], folded.note)
    return folded


IDENTITY = ("file", "case", "backend", "device", "dtype")


def cost_energy_unknown(frame: pd.DataFrame) -> list[str]:
    """The sentence that stands for the cost and energy table when no result has one of its figures
    ([] when the table has one, or when no result is priced)."""
    table = cost_energy_table(frame)
    if not table.empty or _rows_of(frame, cost=True).empty:
        return []
    return ["Cost and energy: no figure known for any result, so no table. "
            + table.note.removeprefix(MONEY_NOTE).strip()]


PRICE = "no price given: --price-per-hour or --prices"
WHY_NA = {"$/hour": PRICE, "$ per epoch": PRICE,
          "roofline": "no measured bandwidth: `xpubench ceilings` measures it",
          "measured ceiling": "none measured and no matmul of the same backend and precision in the file",
          CEILING_AT_LEAST: "no matmul of the same backend and precision in the file",
          "% of ceiling, at most": "no ceiling",
          "% of ceiling": "no ceiling", "FLOP/byte": "bytes moved not counted"}
