"""What a figure costs the user, beside it: the summary's compile column and the cost table under it
(report/tables/summary.py), the LLM table's compile column:

* ``compile``: the ahead-of-time compilation each worker process paid before its first timed step
  (``compile_s``, the median over the case's processes; a language model's: its prefill and decode), and
  the break-even where the fastest setup compiles longer than a slower one: after how much work its
  faster steady rate has paid the extra compile back (docs/methodology.md, "Compile time and its
  break-even");
* ``cost``: the summary's rows again, each backend's figure as dollars at the price per device-hour the run
  was given (``--price-per-hour`` / ``--prices``, analysis/cost.py), per the row's unit: per 1M training
  samples or predictions, per 1M generated tokens (a tg row) or prompt tokens (a pp row), per PFLOP
  (matmul), for the time to a quality target.

A figure is handed in as a ``Priced`` item: the column's label, its frame row, the figure shown and
whether it is a prompt (pp) figure. (The report's cost and energy table, per sample, is costs.py's.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xpubench.report.base.cells import fmt_seconds
from xpubench.report.base.frame import num, row_mode
from xpubench.report.tables.costs import usd
from xpubench.report.tables.target import is_target_row


@dataclass(frozen=True)
class Priced:
    label: str          # the summary column's header ("torch", "jax cpu")
    row: object         # its frame row
    value: float        # the figure the summary shows (a rate, higher is better; or seconds to target)
    prompt: bool = False   # a language model's pp figure (its compile is shown on the tg row)


COMPILE_NOTE = ("compile: the ahead-of-time compilation each worker process paid before its first timed step "
                "(median over the processes; a language model's on its tg row: prefill and decode); a column not "
                "named compiled nothing apart (eager, llama.cpp; Keras compiles inside its first step)")


def compile_seconds(row) -> float | None:
    return num(row, "compile_s")


def compile_text(row) -> str:
    """The LLM table's cell: the compile's seconds; "none" for a generation that compiles nothing apart
    (eager decode, llama.cpp: the loop records None there)."""
    seconds = compile_seconds(row)
    if seconds is not None:
        return fmt_seconds(seconds)
    return "none" if row.get("mode") == "generate" else "n/a"


def compile_cell(items: list[Priced]) -> str:
    """The summary's compile cell: "torch 58.1 s, jax 4.6 s" (a column with none is not named)."""
    return ", ".join(f"{i.label} {fmt_seconds(compile_seconds(i.row))}" for i in items
                     if not i.prompt and compile_seconds(i.row) is not None)


def break_even(items: list[Priced], unit: str) -> list[str]:
    """Where the fastest figure's setup compiles longer than a slower one's: the work (in the line's ``unit``,
    "tok/s" -> tokens) after which its faster rate has paid the extra compile back, per process:
    extra compile / (time per unit of the slower - time per unit of the faster)."""
    what = unit.removesuffix("/s").strip()
    ranked = sorted((i for i in items if i.value and not i.prompt), key=lambda i: i.value, reverse=True)
    if len(ranked) < 2 or not what or "FLOP" in what:
        return []
    fast, lines = ranked[0], []
    for slow in ranked[1:]:
        extra = (compile_seconds(fast.row) or 0.0) - (compile_seconds(slow.row) or 0.0)
        saved = 1 / slow.value - 1 / fast.value
        if extra <= 0 or saved <= 0:
            continue
        n = math.ceil(extra / saved)
        lines.append(f"{fast.label} compiles {fmt_seconds(extra)} longer than {slow.label} and pays it back after "
                     f"{n:,} {_plural(what)} per process")
    return lines


def _plural(what: str) -> str:
    return {"tok": "tokens"}.get(what, what if what.endswith("s") else what + "s")


def cost_metric(item: Priced) -> str | None:
    """The cost figure of a summary figure: its mode's first priced one (results/modes.py ``priced``), a pp
    figure's per 1M prompt tokens, a time to target's dollars."""
    if is_target_row(item.row):
        return "usd_to_target"
    if item.prompt:
        return "usd_per_1m_prompt_tokens"
    mode = row_mode(item.row)
    return mode.priced[0][0] if mode and mode.priced else None


COST_UNITS = {"usd_per_1m_samples": "1M samples", "usd_per_1m_predictions": "1M predictions",
              "usd_per_1m_tokens": "1M generated tokens", "usd_per_1m_prompt_tokens": "1M prompt tokens",
              "usd_per_pflop": "PFLOP", "usd_to_target": "run to target"}


def _price(value: float) -> str:
    return f"${value:,.2f}" if value >= 0.01 or value == 0 else f"${value:.2g}"


def cost_records(lines: list[tuple[str, str, str, list[Priced]]], headers: list[str]) -> tuple[str, list[dict]]:
    """(the cost table's title, its rows) from the summary's lines (workload, test, dtype, their figures): a
    row per line with a priced figure, its unit, a column per header holding dollars ("-": no price or no
    figure), the cheapest; ([]) where nothing is priced."""
    records, prices, last = [], {}, None
    for workload, test, dtype, items in lines:
        costs = {i.label: num(i.row, cost_metric(i)) for i in items}
        costs = {k: v for k, v in costs.items() if v is not None}
        if not costs:
            continue
        prices.update({i.label: num(i.row, "usd_per_hour") for i in items if i.label in costs})
        per = {cost_metric(i) for i in items if i.label in costs}
        records.append({"workload": workload if workload != last else "", "test": test, "dtype": dtype,
                        "per": COST_UNITS.get(per.pop(), "result") if len(per) == 1 else "result",
                        **{h: usd(costs[h]) if h in costs else "-" for h in headers},
                        "cheapest": min(costs, key=costs.get) if len(costs) > 1 else ""})
        last = workload
    shown = [h for h in headers if any(r[h] != "-" for r in records)]
    records = [{k: v for k, v in r.items() if k not in headers or k in shown} for r in records]
    if records and not any(r["cheapest"] for r in records):
        records = [{k: v for k, v in r.items() if k != "cheapest"} for r in records]
    said = (f"{_price(next(iter(prices.values())))} per device-hour" if len(set(prices.values())) == 1 else
            "the prices given (" + ", ".join(f"{k} {_price(v)}/h" for k, v in prices.items()) + ")")
    return f"Cost at {said} (--price-per-hour / --prices): dollars per the row's unit, per backend", records
