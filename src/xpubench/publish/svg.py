"""A figure over time, one line per machine, as inline SVG (no library, no script): each point links to its
run page and says its value in a tooltip; a point whose run changed against the machine's previous run of
the case is marked (red: slower, green: faster).

A change is marked by the gate's rule without its bootstrap (report/compare_gate.py): two or more
processes on each side, every process of one run beyond every process of the other
(``results.stats.separated``), and a change of at least ``MIN_CHANGE``. One process on a side is never
marked: the noise between processes is unknown there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from xpubench.report.render.html import esc
from xpubench.results.stats import separated

MIN_CHANGE = 0.05
PALETTE = ("#1f6fb4", "#e07b00", "#2a9d4a", "#8e44ad", "#c0392b", "#16a0a0", "#7f6a00", "#d6589f", "#555555",
           "#9cc3e6", "#f3b27a", "#95d5a4")
W, H, LEFT, RIGHT, TOP, BOTTOM = 720, 240, 64, 40, 14, 38
TICKS = 5           # time-axis labels: 5 of at most 16 characters (11px) fit 616 px with room between them
LEGEND_ROW, LEGEND_CHARS, HALF = 18, 100, 48   # legend: labels whole up to 100 characters, two a row up to 48
DASHES = ("", "6 3", "2 2")   # the palette's first, second and third round: lines of one colour stay apart


@dataclass(frozen=True)
class Point:
    date: str                  # ISO-8601
    value: float               # the headline figure
    time_s: float | None       # the headline time (the change is read on it)
    groups: list               # the headline samples of each process
    href: str
    label: str                 # the tooltip


def _seconds(date: str) -> float:
    try:
        moment = datetime.fromisoformat(date.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


def _prefix(top: float, unit: str) -> tuple[float, str]:
    """(the divisor, the axis unit): FLOP/s figures in G/T FLOP/s, others as they are."""
    if unit.endswith("FLOP/s"):
        for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
            if top >= scale:
                return scale, prefix + unit
    return 1.0, unit


def _short(text: str, width: int) -> str:
    """At most ``width`` characters, cut in the middle: the end of a machine label (its CPU model) is kept."""
    return text if len(text) <= width else text[: width // 2 - 1] + "\u2026" + text[-(width - width // 2):]


def time_ticks(x0: float, x1: float, ticks: int = TICKS) -> list[tuple[float, str]]:
    """(seconds, label) of up to ``ticks`` times evenly spread over [x0, x1], no two labels alike: dates, or
    "MM-DD HH:MM" where the ticks are less than a day apart."""
    if x1 <= x0:
        ticks = 1
    step = (x1 - x0) / max(1, ticks - 1)
    out: list[tuple[float, str]] = []
    for k in range(ticks):
        at = x0 + k * step if ticks > 1 else (x0 + x1) / 2
        moment = datetime.fromtimestamp(at, timezone.utc)
        label = moment.strftime("%m-%d %H:%M" if step < 86400 else "%Y-%m-%d")
        if not out or out[-1][1] != label:
            out.append((at, label))
    return out


def change(before: Point, after: Point) -> str:
    """"slower", "faster" or "" (see the module docstring)."""
    a, b = before.groups, after.groups
    if min(len(a), len(b)) < 2 or not before.time_s or not after.time_s:
        return ""
    if not all(len(g) for g in [*a, *b]) or not separated(a, b):
        return ""
    ratio = after.time_s / before.time_s
    if abs(ratio - 1) < MIN_CHANGE:
        return ""
    return "slower" if ratio > 1 else "faster"


def chart(title: str, unit: str, series: dict[str, list[Point]]) -> str:
    """An SVG of ``series`` ({machine label: points}); "" with fewer than two points in all."""
    points = [p for ps in series.values() for p in ps]
    if len(points) < 2:
        return ""
    xs = [_seconds(p.date) for p in points]
    x0, x1 = min(xs), max(xs)
    y1 = max(p.value for p in points) * 1.1 or 1.0
    scale, unit = _prefix(y1, unit)

    def x(date: str) -> float:
        return LEFT + (W - LEFT - RIGHT) * ((_seconds(date) - x0) / (x1 - x0) if x1 > x0 else 0.5)

    def y(value: float) -> float:
        return TOP + (H - TOP - BOTTOM) * (1 - value / y1)

    columns = 2 if max(len(m) for m in series) <= HALF else 1
    rows = -(-len(series) // columns)
    out = [(f'<svg class="chart" viewBox="0 0 {W} {H + LEGEND_ROW * rows}" role="img" '
           f'xmlns="http://www.w3.org/2000/svg"><title>{esc(title)}</title>'),
           f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" class="axis"/>']
    for tick in np.linspace(0, y1, 5):
        out.append(f'<text x="{LEFT - 6}" y="{y(tick) + 4:.1f}" class="tick" text-anchor="end">'
                   f'{tick / scale:.3g}</text>'
                   f'<line x1="{LEFT}" y1="{y(tick):.1f}" x2="{W - RIGHT}" y2="{y(tick):.1f}" class="grid"/>')
    out.append(f'<text x="{LEFT}" y="{TOP - 2}" class="tick">{esc(unit)}</text>')
    for at, text in time_ticks(x0, x1):
        pos = LEFT + (W - LEFT - RIGHT) * ((at - x0) / (x1 - x0) if x1 > x0 else 0.5)
        out.append(f'<line x1="{pos:.1f}" y1="{H - BOTTOM}" x2="{pos:.1f}" y2="{H - BOTTOM + 4}" class="axis"/>'
                   f'<text x="{pos:.1f}" y="{H - BOTTOM + 16}" class="tick" text-anchor="middle">{esc(text)}</text>')
    for i, (machine, ps) in enumerate(series.items()):
        colour = PALETTE[i % len(PALETTE)]
        dash = DASHES[i // len(PALETTE) % len(DASHES)]
        dash = f' stroke-dasharray="{dash}"' if dash else ""
        ps = sorted(ps, key=lambda p: _seconds(p.date))
        if len(ps) > 1:
            path = " ".join(f"{x(p.date):.1f},{y(p.value):.1f}" for p in ps)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>')
        for before, p in zip([None, *ps], ps):
            moved = change(before, p) if before else ""
            mark = f' class="{moved}"' if moved else ""
            note = f" ({moved} than the previous run: processes separate)" if moved else ""
            out.append(f'<a href="{esc(p.href)}"><circle cx="{x(p.date):.1f}" cy="{y(p.value):.1f}" '
                       f'r="{5 if moved else 3}" fill="{colour}"{mark}><title>{esc(p.label + note)}</title>'
                       "</circle></a>")
        lx, ly = LEFT + (i % columns) * (W - LEFT) // 2, H + 4 + LEGEND_ROW * (i // columns)
        out.append(f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 18}" y2="{ly - 4}" stroke="{colour}" stroke-width="3"'
                   f'{dash}/><text x="{lx + 22}" y="{ly}" class="legend">{esc(_short(machine, LEGEND_CHARS))}</text>')
    out.append("</svg>")
    return "".join(out)
