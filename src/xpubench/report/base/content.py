"""What a report holds, independent of its format: sections of text, tables and charts.

``build.py`` fills it from results files; ``html.py`` and ``markdown.py`` write it out. Table cells
are already formatted strings; a cell ending in NOISY_MARK is a figure whose spread makes it unreliable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

NOISY_MARK = " !"
NOISY_LEGEND = ("! = noisy: the harness flagged the figure (CV >= 10%, fewer than 3 samples, or a cut "
                "time budget)")


@dataclass
class Chart:
    name: str            # file name stem for Markdown reports, e.g. "throughput"
    title: str
    caption: str
    png: bytes
    folded: bool = False  # shown collapsed (HTML <details>): secondary, e.g. curves of synthetic data


@dataclass
class TableBlock:
    title: str
    frame: pd.DataFrame  # string cells
    note: str = ""
    lead: str = ""       # said once above the table (a value every row shares, its column left out)


@dataclass
class Section:
    title: str
    anchor: str
    intro: str = ""
    bullets: list[str] = field(default_factory=list)
    tables: list[TableBlock] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)


@dataclass
class Report:
    title: str
    subtitle: str
    sections: list[Section]
    warnings: list[str] = field(default_factory=list)
