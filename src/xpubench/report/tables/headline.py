"""A case's headline figure as the summary and the answer read it (its mode's ``headline``,
results/modes.py), its spread and its cost; the summary table itself is report/tables/summary.py."""

from __future__ import annotations

import numpy as np

from xpubench.legible.units import fmt_rate
from xpubench.report.base.cells import noisy
from xpubench.report.base.figures import shown
from xpubench.report.base.frame import ResultSet, num, row_mode
from xpubench.report.tables import target
from xpubench.results.fold import process_groups


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
    if target.is_target_row(row):   # a quality target: the time to it, or "not reached" (report/tables/target.py)
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


def rate_groups(data: ResultSet, row, metric: str | None = None) -> list:
    """The per-process samples the row's headline figure (or ``metric``) is derived from: the time of its
    mode's Rate (results/modes.py; inference's samples/s: its full passes, a language model's pp: its
    prefills), as the statistic reads them, else the headline samples."""
    result, mode = data.result(row), row_mode(row)
    rate = mode.rate(metric or headline_name(row)) if mode else None
    if rate and result.samples.get(rate.time):
        return [np.asarray(g, dtype=np.float64) for g in process_groups(result, rate.time)]
    return data.groups(row)
