"""A cell's text, the same in every table: numbers, seconds (1.23 s, 45.6 ms, 789 µs), shares, ratios,
what a case is measured at, the noisy mark; "n/a" for a figure that is unknown; and the identity columns
(file, backend, device, chip, dtype) most tables start with."""

from __future__ import annotations

import math

import pandas as pd

from xpubench.report.base.content import NOISY_MARK
from xpubench.report.base.frame import many_sources, setting
from xpubench.report.base.table import ALWAYS, LOW, Column


def fmt(value, spec: str = ",.1f", scale: float = 1.0, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value * scale:{spec}}{unit}"


def fmt_seconds(seconds: float | None) -> str:
    """1.23 s, 45.6 ms, 789 µs; None -> "n/a"."""
    if seconds is None or math.isnan(seconds):
        return "n/a"
    if seconds >= 1:
        return f"{seconds:,.3g} s" if seconds < 1000 else f"{seconds:,.0f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:,.3g} ms"
    return f"{seconds * 1e6:,.3g} µs"


def noisy(row, text: str) -> str:
    return text + NOISY_MARK if row.get("noisy") else text


def pct(value, *, estimate=False) -> str:
    return "n/a" if value is None or pd.isna(value) else f"{value:.1%}" + (" (est.)" if estimate else "")


def ratio(top, bottom) -> str:
    return "n/a" if not top or not bottom else f"{top / bottom:,.2f}x"


def what(row) -> str:
    """What a case is measured at, with its device count: "N=1024", "batch 32 x2"."""
    devices = int(row["devices"])
    return setting(row) + (f" x{devices}" if devices > 1 else "")


def case_text(row) -> str:
    """Mode, dtype and setting of a case: "train fp32 batch 32"."""
    return f"{row['mode']} {row['precision']} {what(row)}".strip()


def batch(row) -> str:
    if pd.isna(row.get("batch_size")):
        return "n/a"
    devices = int(row["devices"])
    return f"{int(row['batch_size'])}" + (f" x{devices}" if devices > 1 else "")


def text_column(name: str, key: str, priority: int = ALWAYS) -> Column:
    return Column(name, lambda r: str(r.get(key)), priority=priority, text=True)


def identity(rows: pd.DataFrame, *, chip_priority: int = LOW) -> list[Column]:
    """file (when the rows come from several), backend, device, chip, dtype."""
    cols = [text_column("file", "source")] if many_sources(rows) else []
    return cols + [text_column("backend", "backend"), text_column("device", "device"),
                   Column("chip", lambda r: str(r.get("device_name") or "n/a"), priority=chip_priority, text=True),
                   text_column("dtype", "precision")]
