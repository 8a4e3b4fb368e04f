"""One table model for every output: a title, columns (name, unit, how a row's cell is written, and how
important the column is) and the rows of the results frame they are read from.

The same Table renders to the terminal (rich; the least important columns are dropped until it fits the
width, and a pipe gets plain text), and to Markdown and HTML (:meth:`Table.frame`, every column, split
by column group where a page would need a horizontal scroll bar).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table as RichTable

from xpubench.legible.plaintext import markup

ALWAYS = 0     # priority: kept at any width
LOW = 3        # the first dropped on a narrow terminal


@dataclass(frozen=True)
class Column:
    name: str
    cell: Callable[[pd.Series], str]   # the row's formatted cell
    unit: str = ""                     # shown in the header: "compile (s)"; "" when the cell carries it
    priority: int = 1                  # 0 = always shown; higher = dropped earlier when narrow
    text: bool = False                 # words (left-aligned) rather than a figure
    group: str = ""                    # "" = identifies the row (repeated in every part of a split)
    whole: bool = False                # the terminal never wraps its cells (the others wrap first)

    @property
    def header(self) -> str:
        return f"{self.name} ({self.unit})" if self.unit else self.name


@dataclass
class Table:
    title: str
    columns: list[Column]
    rows: pd.DataFrame                 # rows of the results frame (report/base/frame.py), in display order
    note: str = ""
    parts: dict[str, str] = field(default_factory=dict)  # column group -> title of that part
    compact: bool = False              # the terminal: no column rules, two spaces between columns (the summary)

    @property
    def empty(self) -> bool:
        return self.rows is None or self.rows.empty

    def frame(self, columns: list[Column] | None = None) -> pd.DataFrame:
        """The table as a DataFrame of strings (every column, or the ones given)."""
        cols = self.columns if columns is None else columns
        if self.empty:
            return pd.DataFrame()
        records = [[c.cell(r) for c in cols] for _, r in self.rows.iterrows()]
        return pd.DataFrame(records, columns=[c.header for c in cols])

    def split(self) -> list[tuple[str, pd.DataFrame]]:
        """(title, frame) per column group named in ``parts``, each with the identifying columns; the
        whole table as one part when it has no parts."""
        if not self.parts:
            return [(self.title, self.frame())]
        ident = [c for c in self.columns if not c.group]
        return [(title, self.frame(ident + [c for c in self.columns if c.group == group]))
                for group, title in self.parts.items()]

    def rich(self, console: Console, width: int | None = None) -> RichTable:
        """The table for the terminal: the least important columns dropped until it fits ``width``
        (default: the console's); plain text (no box, no style) when the console is not a terminal."""
        width = width or console.width
        cells = self.frame()
        kept = list(self.columns)
        # the drop order: the least important first, the rightmost of equal importance first
        order = sorted((c for c in self.columns if c.priority != ALWAYS),
                       key=lambda c: (-c.priority, -self.columns.index(c)))
        table = self._rich(console, kept, cells)
        for column in order:
            if _natural_width(console, table) <= width:
                break
            kept.remove(column)
            table = self._rich(console, kept, cells)
        gaps = 2 * (len(kept) - 1) if self.compact else 3 * len(kept) + 1
        if sum(_least_widths(kept, cells, True).values()) + gaps > width:
            table = self._rich(console, kept, cells, whole=False)   # too narrow even so: every cell may wrap
        return table

    def _rich(self, console: Console, kept: list[Column], cells: pd.DataFrame, whole: bool = True) -> RichTable:
        plain = not console.is_terminal
        table = RichTable(title=markup(self.title), box=box.SIMPLE_HEAD if plain or self.compact else box.HEAVY_HEAD,
                          show_edge=not (plain or self.compact), header_style="" if plain else "bold",
                          title_style="", **({"padding": (0, 0, 0, 1), "pad_edge": False} if self.compact else {}))
        least = _least_widths(kept, cells, whole)
        fixed = _fitted_widths(kept, cells, least, console.width - (2 * (len(kept) - 1) if self.compact else
                                                                    3 * len(kept) + 1)) if least else {}
        for c in kept:
            table.add_column(markup(c.header), justify="left" if c.text else "right", overflow="fold",
                             min_width=least.get(c.header), width=fixed.get(c.header), no_wrap=c.whole and whole)
        for _, row in cells.iterrows():
            table.add_row(*(markup(row[c.header]) for c in kept))   # text from files is text
        return table


def _text_cell(value) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def text_table(title: str, frame: pd.DataFrame, note: str = "") -> Table:
    """A table whose cells are already strings, one row per row of ``frame`` (a pivot, one row per worker
    process, one per fact): every column kept at any width, words left-aligned, a missing cell empty."""
    rows = frame.reset_index(drop=True)
    figure = re.compile(r"^[-+~]?[\d.,]")
    cols = [Column(str(name), lambda r, name=name: _text_cell(r[name]), priority=ALWAYS,
                   text=not rows[name].astype(str).str.match(figure).all()) for name in rows.columns]
    return Table(title, cols, rows, note)


def _least_widths(kept: list[Column], cells: pd.DataFrame, whole: bool) -> dict[str, int]:
    """{header: the least width} of the columns marked ``whole`` (their longest cell) and, with ``whole``, of
    the others (their longest word: words are not cut); {} without ``whole``."""
    out = {}
    for c in kept if whole and any(c.whole for c in kept) else []:
        texts = [str(v) for v in cells[c.header]] if not cells.empty else []
        words = [len(w) for v in texts for w in v.split()] + [len(w) for w in c.header.split()]
        out[c.header] = max([len(v) for v in texts] + words) if c.whole else max(words)
    return out


def _fitted_widths(kept: list[Column], cells: pd.DataFrame, least: dict[str, int], room: int) -> dict[str, int]:
    """Widths that fit ``room``: every column at its natural width, then the wrapping ones (not ``whole``)
    narrowed, the widest first, down to their least widths; {} when the natural widths fit."""
    natural = {c.header: max([len(line) for v in cells[c.header] for line in str(v).splitlines()] +
                             [len(c.header)]) for c in kept}
    excess = sum(natural.values()) - room
    while excess > 0:
        narrower = [c.header for c in kept if not c.whole and natural[c.header] > least[c.header]]
        if not narrower:
            break
        widest = max(narrower, key=lambda h: natural[h])
        natural[widest] -= 1
        excess -= 1
    return natural if sum(natural.values()) <= room + excess else {}


def _natural_width(console: Console, table: RichTable) -> int:
    return Measurement.get(console, console.options.update_width(10_000), table).maximum


def print_table(table: Table, console: Console) -> None:
    if not table.empty:
        console.print(table.rich(console), highlight=False)
        if table.note:
            console.print(table.note, markup=False, highlight=False)
