"""A mode's figures as text (results/modes.py ``Figure``), formatted by the unit results/metrics.py declares:
FLOP/s with its own prefix (143.7 GFLOP/s), rates with three significant figures and the mode's unit
(0.370 samples/s, 1,234 tok/s), times in milliseconds (12.80 ms/batch), fractions and losses with four
decimals (accuracy 0.9876). The summary, the progress line and the tables all print through ``shown``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xpubench.legible.units import fmt_flops, fmt_rate
from xpubench.results.metrics import unit
from xpubench.results.modes import Figure, Mode


def _value_text(metric: str, value: float) -> str:
    kind = unit(metric)
    if kind == "FLOP/s":
        return fmt_flops(value)
    if kind == "s":
        return f"{value * 1e3:,.2f} ms"
    if kind == "1/s":
        return fmt_rate(value)
    return f"{value:.4f}"


def shown(figure: Figure, value: Any, *, named: bool = False, metric: str | None = None) -> str:
    """``value`` of ``figure`` with its unit ("n/a" when None); ``named``: with the name before it
    ("warm 12.3 GFLOP/s", "TTFT 1.20 ms"). ``metric``: the metric a ``named_by`` figure read."""
    metric = metric or figure.metric
    if value is None:
        return "n/a"
    text = _value_text(metric, value)
    if figure.after:
        text += figure.after if figure.after.startswith("/") else f" {figure.after}"
    before = metric if figure.named_by else figure.before
    return f"{before} {text}" if named and before else text


def line(mode: Mode, metrics: Mapping[str, Any]) -> str:
    """A finished case's progress line: its headline figure, then the mode's ``details`` it carries."""
    head = mode.headline_figure(metrics)
    parts = [shown(head, metrics.get(head.metric), named=True)] if head else []
    for figure in mode.details:
        name = figure.name_in(metrics)
        if name is not None and metrics.get(name) is not None:
            parts.append(shown(figure, metrics[name], named=True, metric=name))
    return ", ".join(parts)
