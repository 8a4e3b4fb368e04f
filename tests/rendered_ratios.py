"""Reading what xpubench rendered (terminal text, Markdown, HTML) back into figures, and checking every ratio it
prints against the figures it prints beside it, within the rounding of the printed digits
(tests/test_figures_agree.py). Nothing here imports xpubench: the text alone is the evidence.

- ``Fig``: a printed figure ("47.1", "134.1 GFLOP/s", "21.2 ms", "1.28 ms (n=7)") as the interval of values
  its digits allow, in base units (FLOP/s, seconds), and whether it is a rate (higher is faster) or a time;
- ``Tables``: the tables of a rendering (fixed-width terminal text, rich boxes, pipe tables, HTML), each a
  header and rows of cell texts;
- ``Checked``: every relation verified or broken; ``ratio_tokens(text)`` is every ratio printed (N.NNx, the
  ends of a 95% interval left out), so a test can require that each one was verified.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

NUM = r"\d[\d,]*(?:\.\d+)?(?:e[+-]\d+)?"
UNITS = {None: (1.0, "count"), "tok/s": (1.0, "rate"), "samples/s": (1.0, "rate"), "s": (1.0, "time"),
         "ms": (1e-3, "time"), "µs": (1e-6, "time"), "us": (1e-6, "time"),
         **{f"{p}FLOP/s": (s, "rate") for p, s in (("", 1), ("k", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12),
                                                    ("P", 1e15))}}
UNIT = "|".join(re.escape(u) for u in sorted(filter(None, UNITS), key=len, reverse=True))
FIG = rf"{NUM}(?: (?:{UNIT})(?![\w/]))?"
RATIO = re.compile(r"(?<![\d.])(\d+\.\d{2})x\b")
INTERVAL = re.compile(r"(?:95% (?:CI|interval)) \d+\.\d+ ?- ?\d+\.\d+x?")


@dataclass(frozen=True)
class Fig:
    text: str
    low: float
    high: float
    kind: str    # rate, time or count

    def speed_over(self, other: Fig) -> tuple[float, float]:
        """The interval of this figure's speed over ``other``'s: a rate's ratio, or a time's inverse ratio."""
        top, bottom = (self, other) if self.kind != "time" else (other, self)
        return top.low / bottom.high, top.high / bottom.low


def fig(text: str) -> Fig | None:
    """The figure a cell or a phrase starts with; None where it starts with no number."""
    m = re.match(rf"\s*[~±]?\s*({NUM})(?: ({UNIT})(?![\w/]))?", str(text))
    if not m:
        return None
    digits = m[1].replace(",", "")
    mantissa, _, exponent = digits.partition("e")
    half = 0.5 * 10.0 ** (-len(mantissa.partition(".")[2]) + int(exponent or 0))
    scale, kind = UNITS[m[2]]
    value = float(digits)
    return Fig(m[0].strip(), (value - half) * scale, (value + half) * scale, kind)


def within(printed: str, low: float, high: float) -> bool:
    """Whether a printed number (a ratio) can be the rounding of a value in [low, high]."""
    f = fig(printed)
    return f is not None and f.low <= high * (1 + 1e-9) and f.high >= low * (1 - 1e-9)


def ratio_tokens(text: str) -> list[str]:
    """Every N.NNx printed in ``text`` but the ends of a 95% interval."""
    return RATIO.findall(INTERVAL.sub("", text))


@dataclass
class Checked:
    where: str
    verified: list[str] = field(default_factory=list)   # the ratio tokens checked (N.NN), one per check
    broken: list[str] = field(default_factory=list)

    def check(self, ok: bool, ratio: str | None, what: str) -> None:
        if ratio is not None:
            self.verified.append(ratio)
        if not ok:
            self.broken.append(f"{self.where}: {what}")


# ---- tables ----------------------------------------------------------------------------------------------

@dataclass
class Table:
    header: list[str]
    rows: list[dict[str, str]]
    lead: str = ""     # "Every row: batch = 256." above it (a report's columns said once)


def fixed_width(lines: list[str]) -> Table:
    """A table printed with spaces between its columns (rich's compact summary): columns are the runs of
    characters that are not blank in every line; a run of two or more blanks in every line parts them."""
    width = max(len(line) for line in lines)
    padded = [line.ljust(width) for line in lines]
    blank = [all(line[i] == " " for line in padded) for i in range(width)]
    spans, start, i = [], None, 0
    while i < width:
        if not blank[i]:
            start = i if start is None else start
            i += 1
            continue
        run = next((j for j in range(i, width) if not blank[j]), width) - i
        if run >= 2 and start is not None:
            spans.append((start, i))
            start = None
        i += run
    if start is not None:
        spans.append((start, width))
    cells = [[line[a:b].strip() for a, b in spans] for line in padded]
    return Table(cells[0], [dict(zip(cells[0], row)) for row in cells[1:]])


def boxed(lines: list[str]) -> list[Table]:
    """rich's boxed tables (┃ head ┃, │ cell │) in ``lines``."""
    tables, current = [], None
    for line in lines:
        if "┃" in line:
            current = Table([c.strip() for c in line.strip().strip("┃").split("┃")], [])
            tables.append(current)
        elif "│" in line and current is not None:
            current.rows.append(dict(zip(current.header, (c.strip() for c in line.strip().strip("│").split("│")))))
    return tables


def markdown_tables(text: str) -> list[Table]:
    """Pipe tables, cells unescaped (``\\|`` and friends), each with the "Every row: ..." line above it."""
    tables, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            head = _pipe_cells(line)
            rows, j = [], i + 2
            while j < len(lines) and lines[j].startswith("|"):
                rows.append(dict(zip(head, _pipe_cells(lines[j]))))
                j += 1
            lead = next((x for x in reversed(lines[max(0, i - 3):i]) if x.startswith("Every row:")), "")
            tables.append(Table(head, rows, unescape_md(lead)))
    return tables


def _pipe_cells(line: str) -> list[str]:
    return [unescape_md(c.strip()) for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def unescape_md(text: str) -> str:
    return html.unescape(re.sub(r"\\(.)", r"\1", text))


class _Html(HTMLParser):
    """Tables (with the lead paragraph above each) and every other text block of an HTML page."""

    def __init__(self):
        super().__init__()
        self.tables: list[Table] = []
        self.blocks: list[str] = []
        self._text: list[str] | None = None
        self._row: list[str] | None = None
        self._head: list[str] | None = None
        self._lead = ""

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._head = None
            self.tables.append(Table([], [], self._lead))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th", "li", "p", "h1", "h2", "h3", "figcaption", "strong") and self._text is None:
            self._text = []
        elif tag in ("script", "style"):
            self._text = None

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._text is not None and self._row is not None:
            self._row.append(" ".join("".join(self._text).split()))
            self._text = None
        elif tag == "tr" and self._row is not None and self.tables:
            table = self.tables[-1]
            if not table.header:
                table.header = self._row
            else:
                table.rows.append(dict(zip(table.header, self._row)))
            self._row = None
        elif tag in ("li", "p", "h1", "h2", "h3", "figcaption", "strong") and self._text is not None:
            text = " ".join("".join(self._text).split())
            self.blocks.append(text)
            self._lead = text if tag == "p" and text.startswith("Every row:") else ""
            self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


def html_parts(page: str) -> tuple[list[Table], list[str]]:
    """(tables, text blocks) of an HTML page; a table cell's text is in its row, not in the blocks."""
    parser = _Html()
    parser.feed(page)
    return parser.tables, parser.blocks


def lead_value(table: Table, column: str) -> str | None:
    """A column said once above the table ("Every row: N = 2048, ...") or None."""
    m = re.search(rf"(?:^|, |: ){re.escape(column)} = ([^,]+?)(?:,|\.$)", table.lead)
    return m[1] if m else None


def geometric(values: list[Fig]) -> tuple[float, float]:
    return (math.exp(sum(math.log(v.low) for v in values) / len(values)),
            math.exp(sum(math.log(v.high) for v in values) / len(values)))
