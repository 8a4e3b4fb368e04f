"""Efficiency, energy and cost in the reports: against the spec peak and the measured ceilings, joules
and dollars per result (ceilings/annotate.py computes the figures when a file is loaded).

* ``section(data)``: the HTML / Markdown report's section (tables + the roofline chart);
* ``terminal_table(results)``: the same figures after ``xpubench run``;
* ``peak_cell(...)``: the honest "% of peak" cell the other tables print: "above est. peak" instead of a
  number above 100% (ceilings/efficiency.py).

What every row would say the same is said once, under the table (``fold``): a note clause shared by every
row, a column that is n/a in every row (with why). No local path (a home folder, ~/...) is printed: a
report is meant to be shared (``shareable``).
"""

from __future__ import annotations

import re

import pandas as pd

from xpubench.report.content import Section, TableBlock
from xpubench.report.frame import ResultSet, many_sources, ok_rows
from xpubench.report.table_model import ALWAYS, LOW, Column, Table
from xpubench.units import fmt_flops

MODES = ("matmul", "train", "infer")


def _num(row, name: str):
    value = row.get(name) if hasattr(row, "get") else None
    return None if value is None or (not isinstance(value, str) and pd.isna(value)) else value


def _usd(value) -> str:
    if value is None:
        return "n/a"
    return f"${value:.3g}" if value < 0.01 else (f"${value:,.4f}" if value < 1 else f"${value:,.2f}")


def _fmt(value, spec: str, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{unit}"


def peak_cell(row, name: str = "pct_of_peak") -> str:
    """The "% of peak" (or MFU) cell: the annotated label where there is one ("above est. peak" above an
    estimate), else the percentage, "(est.)" for a CPU estimate; n/a when unknown."""
    value, label = _num(row, name), _num(row, "peak_label")
    if value is None:
        return "n/a"
    if value > 1.0:
        return str(label) if label else ("above est. peak" if _num(row, "peak_is_estimate") else "above spec peak")
    return f"{value:.1%}" + (" (est.)" if _num(row, "peak_is_estimate") else "")


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


def _what(row) -> str:
    if row["mode"] == "matmul":
        return f"matmul N={int(row['size'])}"
    batch = _num(row, "batch_size")
    return f"{row['workload']} {row['mode']}" + (f" b{int(batch)}" if batch is not None else "")


def _ident(row, multi: bool) -> dict[str, str]:
    out = {"file": str(row["source"])} if multi else {}
    out.update(case=_what(row), backend=str(row["backend"]), device=str(row["device"]), dtype=str(row["precision"]))
    return out


def efficiency_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = ok_rows(frame)
    rows = rows[rows["mode"].isin(MODES)] if not rows.empty else rows
    multi, out = many_sources(rows), []
    for _, r in rows.iterrows():
        rate = _num(r, "warm_flops_per_s") if r["mode"] == "matmul" else _num(r, "achieved_flops_per_s")
        if rate is None:
            continue
        bound = _num(r, "ceiling_is_lower_bound")
        ceiling = _num(r, "ceiling_flops_per_s")
        out.append({**_ident(r, multi), "achieved": fmt_flops(rate),
                    "% of peak": peak_cell(r, "pct_of_peak" if r["mode"] == "matmul" else "mfu"),
                    "measured ceiling": ("≥ " if bound and ceiling else "") + fmt_flops(ceiling),
                    "% of ceiling": _num(r, "ceiling_label") or "n/a",
                    "FLOP/byte": _fmt(_num(r, "arithmetic_intensity"), ",.1f"),
                    "roofline": fmt_flops(_num(r, "roofline_flops_per_s")),
                    "note": _num(r, "efficiency_note") or ""})
    return pd.DataFrame(out)


def cost_energy_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = ok_rows(frame)
    rows = rows[rows["mode"].isin(("train", "infer"))] if not rows.empty else rows
    multi, out = many_sources(rows), []
    for _, r in rows.iterrows():
        na = _num(r, "energy_na")
        na = shareable(str(na).removeprefix("n/a: ")) if na else None
        out.append({**_ident(r, multi), "samples/s": _fmt(_num(r, "samples_per_s"), ",.0f"),
                    "$/hour": _usd(_num(r, "usd_per_hour")),
                    "$ per 1M samples": _usd(_num(r, "usd_per_1m_samples")),
                    "$ per epoch": _usd(_num(r, "usd_per_epoch")),
                    "$ per 1M predictions": _usd(_num(r, "usd_per_1m_predictions")),
                    "J/step": _fmt(_num(r, "joules_per_step"), ",.3g"),
                    "J/sample": _fmt(_num(r, "joules_per_sample"), ",.3g"),
                    "samples/J": _fmt(_num(r, "samples_per_joule"), ",.3g"),
                    "W": _fmt(_num(r, "average_watts"), ",.0f"),
                    "energy": f"n/a: {na}" if na else str(_num(r, "energy_source") or "n/a")})
    return pd.DataFrame(out)


PRICE = "no price given: --price-per-hour or --prices"
WHY_NA = {"$/hour": PRICE, "$ per 1M samples": PRICE, "$ per epoch": PRICE, "$ per 1M predictions": PRICE,
          "roofline": "no measured bandwidth: `xpubench ceilings` measures it",
          "measured ceiling": "none measured and no matmul of the same backend and precision in the file",
          "% of ceiling": "no ceiling", "FLOP/byte": "bytes moved not counted"}


def _energy_reason(table: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """When every row has the same reason for no energy figure: the table with a plain "n/a" in its
    energy column, and that reason for each energy column (for ``fold``)."""
    reasons = set(table.get("energy", pd.Series(dtype=str)).astype(str))
    if len(reasons) != 1 or not next(iter(reasons)).startswith("n/a: "):
        return table, {}
    why = next(iter(reasons)).removeprefix("n/a: ")
    return table.assign(energy="n/a"), dict.fromkeys(("J/step", "J/sample", "samples/J", "W", "energy"), why)


def section(data: ResultSet) -> Section | None:
    """The report's "Efficiency, energy and cost" section (None when no result has a FLOP rate)."""
    from xpubench.report.charts import roofline_chart

    frame = data.frame
    eff, money = efficiency_table(frame), cost_energy_table(frame)
    if eff.empty and money.empty:
        return None
    eff_note = ("% of peak: against the chip's dense peak (a CPU's is an estimate: cores x clock measured under "
                "load x FLOP/cycle; a result above it is ranked against the measured ceiling instead). % of ceiling: against the "
                "fastest matmul the ceiling search (`xpubench ceilings`) or this file measured for the same "
                "backend, device and precision; 'within noise' when the excess is inside both figures' 95% "
                "intervals.")
    money_note = ("$ from --price-per-hour / --prices and the steady throughput; energy read around the same timed "
                  "windows as the throughput (RAPL, NVML, AMD SMI); n/a with the reason where nothing is readable.")
    bases = {str(b) for e in data.items for b in [(((e.result.fingerprint or {}).get("host") or {}).get("cpu") or {})
                                                   .get("peak_estimate", {}).get("fp32", {}).get("basis")] if b}
    if bases:
        eff_note += " CPU peak " + " / ".join(sorted(bases)) + "."
    if any(str(v).startswith("≥") for v in eff.get("measured ceiling", [])):
        eff_note += (" ≥ and ≤: no ceiling was measured for that backend and precision, so the fastest matmul "
                     "of the same backend and precision in this file stands in: a lower bound of the ceiling, "
                     "and the % against it an upper bound.")
    eff, eff_said = fold(eff, "note", WHY_NA)
    money, energy_why = _energy_reason(money)
    money, money_said = fold(money, None, {**WHY_NA, **energy_why})
    eff_note += "".join(f" {s[0].upper()}{s[1:]}." for s in eff_said)
    money_note += "".join(f" {s[0].upper()}{s[1:]}." for s in money_said)
    tables = [TableBlock(title, table, note) for title, table, note in (
        ("Achieved FLOP/s against the spec peak and the measured ceiling", eff, eff_note),
        ("Cost and energy", money, money_note)) if not table.empty]
    chart = roofline_chart(frame)
    return Section("Efficiency, energy and cost", "efficiency", intro=(
        "Every result's achieved FLOP/s against what the chip can do (spec peak) and what this machine was "
        "measured to reach (ceilings), with its energy and what it costs at the given price."),
        tables=tables, charts=[chart] if chart is not None else [])


def terminal_table(results) -> Table | None:
    """After ``xpubench run --verbose``: achieved FLOP/s, % of peak and of the ceiling, $ and J, in the one
    table model (report/table_model.py: the least important columns go first on a narrow terminal; None
    when nothing to show). Why energy or a ceiling is n/a goes to the note under the table."""
    frame = ResultSet.load(results).frame
    rows = ok_rows(frame)
    if rows.empty:
        return None
    rows = rows[rows["mode"].isin(MODES) & (rows["workload"] != "selftest")]
    if rows.empty:
        return None

    def rate(r):
        return _num(r, "warm_flops_per_s") if r["mode"] == "matmul" else _num(r, "achieved_flops_per_s")

    columns = [
        Column("case", _what, priority=ALWAYS, text=True),
        Column("backend", lambda r: str(r["backend"]), priority=ALWAYS, text=True),
        Column("device", lambda r: str(r["device"]), priority=2, text=True),
        Column("dtype", lambda r: str(r["precision"]), priority=ALWAYS, text=True),
        Column("achieved", lambda r: fmt_flops(rate(r)), priority=ALWAYS),
        Column("% of peak", lambda r: peak_cell(r, "pct_of_peak" if r["mode"] == "matmul" else "mfu"), priority=1),
        Column("% of ceiling", lambda r: str(_num(r, "ceiling_label") or "n/a"), priority=1),
        Column("$/1M samples", lambda r: _usd(_num(r, "usd_per_1m_samples")), priority=2),
        Column("$/1M predictions", lambda r: _usd(_num(r, "usd_per_1m_predictions")), priority=2),
        Column("J/sample", lambda r: _fmt(_num(r, "joules_per_sample"), ",.3g"), priority=LOW),
        Column("energy", lambda r: "n/a" if _num(r, "energy_na") else str(_num(r, "energy_source") or "n/a"),
               priority=LOW, text=True),
    ]
    notes = [str(v) for name in ("efficiency_note", "energy_na") if name in rows
             for v in rows[name].dropna().unique()]
    # each distinct clause once (the estimate's basis is the same for every CPU row)
    note = shareable("; ".join(dict.fromkeys(part for n in notes for part in n.split("; "))))
    return Table("Efficiency, cost and energy (% of ceiling: against the measured ceiling, `xpubench ceilings`)",
                 columns, rows, note=note)
