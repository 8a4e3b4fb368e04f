"""A case's headline figure as the summary and the answer read it (its mode's ``headline``,
results/modes.py), its spread and its cost, and how many times faster one setup is than another by it
(``speedup``: the answer's and the advice's verdicts); the summary table itself is report/tables/summary.py."""

from __future__ import annotations

import math

import numpy as np

from xpubench.devices.device import is_accelerator
from xpubench.legible.units import fmt_rate
from xpubench.report.base.cells import noisy
from xpubench.report.base.figures import shown
from xpubench.report.base.frame import ResultSet, num, row_mode, series_label
from xpubench.report.tables import target
from xpubench.results.fold import process_groups
from xpubench.results.ratio import RatioEstimate, ratio_estimate


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


def per_work_groups(data: ResultSet, row) -> list[np.ndarray]:
    """Raw times per unit of work, one array per worker process, so cases at different batch sizes compare
    fairly: the samples the headline figure is derived from over its work (results/modes.py ``Rate``:
    training steps over the global batch, inference passes over the evaluation set, decode steps over the
    batch), else the headline samples as they are."""
    mode = row_mode(row)
    rate = mode.rate(headline_name(row)) if mode else None
    factors = [num(row, w) for w in rate.work] if rate else [None]
    work = math.prod(factors) if None not in factors else None   # unknown where any factor is
    return [g / work for g in rate_groups(data, row)] if work else data.groups(row)


def speedup(data: ResultSet, fast, slow) -> RatioEstimate | None:
    """How many times faster ``fast`` is than ``slow`` (time of slow / time of fast), with its interval."""
    return ratio_estimate(per_work_groups(data, fast), per_work_groups(data, slow))


SETUP = ["source", "backend", "variant", "device", "precision", "devices"]   # what the answer calls a setup


def setup_name(row, multi: bool) -> str:
    """A setup as the advice names it: "jax cpu", "torch gpu:0 bf16 (NVIDIA H100 80GB HBM3)", with its
    results file where there are several (``multi``)."""
    chip = f" ({row['device_name']})" if row.get("device_name") and is_accelerator(row["device"]) else ""
    return series_label(row, with_source=multi) + chip
