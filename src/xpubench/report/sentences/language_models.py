"""The answer's one line per language model and test: which runtime generates fastest, whether that is a
clear win, and how near each runtime came to its bandwidth bound, in one sentence, figures first:

    smollm-135m 4/30 layers, pp64/tg16: fastest jax cpu, but llamacpp cpu is within noise of it (136 tok/s
    against 34.5 tok/s, 58% against 15% of the bandwidth bound; the 95% interval contains 1): no clear
    winner; then torch cpu 13.6 tok/s (6%)

A group is one workload, model and test (its key options: ``alike``, so a brief 4-layer model is never ranked
against the full one, nor a test at depth 32 against one at depth 0); a setup is ranked at its fastest batch
size; every runtime and weight format of the group is in the line (the format named where it is not fp32),
each with its tg tokens/s and its share of the bandwidth bound (report/tables/llm.py's cells, "n/a" with
its reason). The verdict is the advice's (``speedup``: results/ratio.py's two-level bootstrap over the
decode steps per token, 5% minimum change): the fastest against the next, "within noise of it ... no clear
winner" unless the interval excludes 1. Several results files (a fleet's machines) are ranked together,
each setup named with its file.

The terminal answer (answer.py) and the report's advice (advice.py: the Markdown and HTML report, the
site's pages, a notebook's ``report``) both print these lines and leave the rows they speak for out of
their per-workload lines: one question, one answer."""

from __future__ import annotations

import pandas as pd

from xpubench.report.base.frame import ResultSet, many_sources, num
from xpubench.report.tables import llm
from xpubench.report.tables.headline import SETUP, figure_text, headline_rate, setup_name, speedup


def model_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows the language-model lines speak for (report/tables/llm.py ``llm_rows``)."""
    return llm.llm_rows(frame)


def model_lines(data: ResultSet) -> list[str]:
    """A line per workload, model and test (see the module docstring); [] without a language model."""
    rows = model_rows(data.frame)
    if rows.empty:
        return []
    rows = rows.assign(rate=[headline_rate(r) for _, r in rows.iterrows()]).dropna(subset=["rate"])
    multi = many_sources(rows)
    return [_line(data, group.sort_values("rate", ascending=False, kind="mergesort").drop_duplicates(SETUP), multi)
            for _, group in rows.groupby(["workload", "model", "alike"], sort=True)]


def _who(row, multi: bool) -> str:
    """"jax cpu", "torch cpu bf16 batch 8", "gpu-node: ..." (advice's setup name, with its batch over 1)."""
    batch = num(row, "batch_size")
    return setup_name(row, multi) + (f" batch {batch:.0f}" if batch and batch > 1 else "")


def _bound(row) -> str:
    """The row's share of its bandwidth bound (report/tables/llm.py's cell), "n/a" with its reason."""
    cell = llm.bound_cell(row)
    return f"n/a ({llm.bound_reason(row)})" if cell == "n/a" else cell


def _line(data: ResultSet, ranked: pd.DataFrame, multi: bool) -> str:
    top = ranked.iloc[0]
    head = f"{llm.model_name(top)}, {llm.lengths_text(top)}: "
    rest = "".join(f"{'; then ' if i == 2 else ', '}{_who(r, multi)} {figure_text(r, r['rate'])} ({_bound(r)})"
                   for i, (_, r) in enumerate(ranked.iterrows()) if i >= 2)
    if len(ranked) == 1:
        return (f"{head}{_who(top, multi)} {figure_text(top, top['rate'], named=True)}, {_bound(top)} of the "
                "bandwidth bound (the only runtime measured)")
    second = ranked.iloc[1]
    est = speedup(data, top, second)
    shares = (f"{_bound(top)} against {_bound(second)}" if _bound(top) != _bound(second) else
              f"both {_bound(top)}")
    figures = (f"{figure_text(top, top['rate'], named=True)} against {figure_text(second, second['rate'])}, "
               f"{shares} of the bandwidth bound")
    first, other, ratio = _who(top, multi), _who(second, multi), top["rate"] / second["rate"]
    if est is None:
        verdict = f"fastest {first}, {ratio:.2f}x {other} ({figures}; no raw samples: no interval)"
    elif not est.significant:
        verdict = f"fastest {first}, but {other} is within noise of it ({figures}; {est.note}): no clear winner"
    else:
        verdict = (f"fastest {first}, {ratio:.2f}x as fast as {other} ({figures}; 95% interval {est.low:.2f}-"
                   f"{est.high:.2f})" + (" (provisional: one process a side)" if est.provisional else ""))
    return head + verdict + rest
