"""What a figure costs the user, right under it: two tables after the summary, its rows again
(report/tables/summary.py ``paid_tables``), and the LLM table's compile column:

* ``compile_table``: the ahead-of-time compilation each worker process paid before its first timed step
  (``compile_s``, the median over the case's processes; a language model's on its tg row: prefill and
  decode), and the break-even where the row's fastest column compiles longer than a slower one: after how
  much work its faster steady rate has paid the extra compile back (docs/methodology.md, "Compile time
  and its break-even");
* ``cost_table``: each backend's figure as dollars at the price per device-hour the run was given
  (``--price-per-hour`` / ``--prices``, analysis/cost.py), per the row's unit: per 1M training samples or
  predictions, per 1M generated tokens (a tg row) or prompt tokens (a pp row), per PFLOP (matmul), for
  the time to a quality target.

A figure is handed in as a ``Priced`` item: the column's label, its frame row, the figure shown and
whether it is a prompt (pp) figure. (The report's cost and energy table, per sample, is costs.py's.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from xpubench.report.base.cells import fmt_seconds
from xpubench.report.base.frame import num, row_mode
from xpubench.report.base.table import ALWAYS, Column, Table
from xpubench.report.tables.costs import usd
from xpubench.report.tables.target import is_target_row


@dataclass(frozen=True)
class Priced:
    label: str          # the summary column's header ("torch", "jax cpu")
    row: object         # its frame row
    value: float        # the figure the summary shows (a rate, higher is better; or seconds to target)
    prompt: bool = False   # a language model's pp figure (its compile is shown on the tg row)


COMPILE_NOTE = ("median over the processes; a language model's on its tg row (prefill and decode compiled "
                "together); none: nothing compiled apart (eager, llama.cpp; Keras compiles inside its first step); "
                "- not run. pays back: after how much work per process the fastest column's faster rate has repaid "
                "the compile it pays beyond a slower column (docs/methodology.md)")


def compile_seconds(row) -> float | None:
    return num(row, "compile_s")


def compiled_apart_s(row) -> float | None:
    """Seconds compiled apart before the steady state: the figure; 0 where its mode records one and the case
    compiled nothing apart (results/metrics_train.py and its neighbours: ``compile_s`` None is eager,
    llama.cpp, Keras inside its first step); None where its mode records no compile (unknown)."""
    seconds = compile_seconds(row)
    if seconds is not None:
        return seconds
    mode = row_mode(row)
    return 0.0 if mode and "compile_s" in mode.metrics.names() else None


def compile_text(row) -> str:
    """A case's compile: its seconds; "none" where its mode records one and it compiled nothing apart (the
    loops record None: eager, llama.cpp, Keras inside its first step), else n/a."""
    seconds = compile_seconds(row)
    if seconds is not None:
        return fmt_seconds(seconds)
    return "none" if compiled_apart_s(row) == 0.0 else "n/a"


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
        fast_s, slow_s = compiled_apart_s(fast.row), compiled_apart_s(slow.row)
        extra = fast_s - slow_s if fast_s is not None and slow_s is not None else None
        saved = 1 / slow.value - 1 / fast.value
        if extra is not None and extra > 0 and saved > 0:
            lines.append(f"{fast.label} after {math.ceil(extra / saved):,} {_plural(what)} against {slow.label}")
    return lines


def _plural(what: str) -> str:
    return {"tok": "tokens"}.get(what, what if what.endswith("s") else what + "s")


Shown = tuple[str, str, str, str, list[Priced]]   # a summary line: workload, test, dtype, rate unit ("": lower
                                                  # is better), its figures


def _table(title: str, records: list[dict], headers: list[str], note: str = "") -> Table:
    """A compact table of ``records``, less the header columns no row fills ("-" everywhere)."""
    shown = [h for h in headers if any(r[h] != "-" for r in records)]
    records = [{k: v for k, v in r.items() if k not in headers or k in shown} for r in records]
    names = [k for k in (records[0] if records else {}) if any(r[k] for r in records)]
    cols = [Column(name, lambda r, name=name: str(r[name]), priority=ALWAYS, whole=name in shown,
                   text=name not in shown) for name in names]
    return Table(title, cols, pd.DataFrame(records), note=note, compact=True)


def compile_table(lines: list[Shown], headers: list[str]) -> Table:
    """The summary's rows with a compile (``compile_s``): per backend column its seconds, and where the
    fastest compiles longer than a slower column, when that pays back (``break_even``); empty where no case
    compiled apart."""
    records, last = [], None
    for workload, test, dtype, unit, items in lines:
        own = {i.label: i for i in items if not i.prompt}
        if not any(compile_seconds(i.row) is not None for i in own.values()):
            continue
        records.append({"workload": workload if workload != last else "", "test": test, "dtype": dtype,
                        **{h: compile_text(own[h].row) if h in own else "-" for h in headers},
                        "pays back": "; ".join(break_even(items, unit)) if unit else ""})
        last = workload
    return _table("Compile time per worker process, before its first timed step", records, headers, COMPILE_NOTE)


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


def cost_table(lines: list[Shown], headers: list[str]) -> Table:
    """The summary's rows with a priced figure: per backend column the dollars per the row's unit ("-": no
    price or no figure), and the cheapest; the price in the title; empty where nothing is priced."""
    records, prices, last = [], {}, None
    for workload, test, dtype, _, items in lines:
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
    said = (f"{_price(next(iter(prices.values())))} per device-hour" if len(set(prices.values())) == 1 else
            "the prices given (" + ", ".join(f"{k} {_price(v)}/h" for k, v in prices.items()) + ")")
    return _table(f"Cost at {said} (--price-per-hour / --prices): dollars per the row's unit, per backend",
                  records, headers)
