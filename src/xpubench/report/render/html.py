"""A report as one self-contained HTML page: inline CSS, charts as base64 ``data:`` PNGs, no scripts,
no external reference of any kind (it opens offline and from an e-mail attachment).

Every string that comes from a results file (device names, messages, hostnames, versions...) passes
through :func:`esc` (``html.escape`` with quotes) before it reaches the page.
"""

from __future__ import annotations

import base64
import html as _html

import pandas as pd

from xpubench.legible.plaintext import shown
from xpubench.report.base.content import NOISY_LEGEND, NOISY_MARK, Chart, Report, Section, TableBlock

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2330;background:#fff}
main{max-width:1200px;margin:0 auto;padding:24px}
h1{margin:.2em 0}h2{border-bottom:2px solid #dde3ea;padding-bottom:.2em;margin-top:2em}
h3{margin:1.4em 0 .4em;font-size:1.02em}
.sub{color:#596275}
table{border-collapse:collapse;margin:.4em 0 1em;font-size:13px;font-variant-numeric:tabular-nums}
th,td{border:1px solid #dde3ea;padding:3px 8px;text-align:right;vertical-align:top;white-space:nowrap}
td.text{white-space:normal}.scroll{overflow-x:auto}
th{background:#f1f4f8;white-space:normal;min-width:3em}
details{margin:1em 0}summary{cursor:pointer;color:#596275}td.text,th.text{text-align:left}
tr:nth-child(even) td{background:#fafbfc}
.noisy{color:#b45309;font-weight:bold}
.warn{background:#fff7e6;border-left:4px solid #f0a020;padding:6px 12px;margin:1em 0}
figure{margin:1em 0 2em}figure img{max-width:100%;height:auto;border:1px solid #eef1f5}
figcaption{color:#596275;font-size:13px;max-width:900px}
nav a{margin-right:1em}.note{color:#596275;font-size:13px}.lead{color:#596275;font-size:13px;margin:.2em 0}
"""


def esc(value) -> str:
    """Text for HTML: every character that could start markup is escaped; None is "n/a"."""
    return _html.escape(shown("n/a" if value is None else value), quote=True)   # no raw control character


def _cell(value, tag: str, text_col: bool) -> str:
    text = "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
    cls = ' class="text"' if text_col else ""
    if text.endswith(NOISY_MARK):
        body = esc(text[: -len(NOISY_MARK)]) + ' <span class="noisy" title="noisy figure">!</span>'
    else:
        body = esc(text)
    return f"<{tag}{cls}>{body}</{tag}>"


def table_html(frame: pd.DataFrame, text_columns: int | None = None) -> str:
    """A DataFrame of strings as an HTML table; the first ``text_columns`` columns are left-aligned
    (default: every column whose cells are not numbers)."""
    cols = list(frame.columns)
    if text_columns is None:
        text_like = {c for c in cols if not frame[c].astype(str).str.match(r"^[-+~±≥≤]?\s?[\d.,]").all()}
    else:
        text_like = set(cols[:text_columns])
    head = "".join(_cell(c, "th", c in text_like) for c in cols)
    body = "".join("<tr>" + "".join(_cell(v, "td", c in text_like) for c, v in zip(cols, row)) + "</tr>"
                   for row in frame.itertuples(index=False))
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def image_html(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{esc(alt)}">'


def warnings_html(lines: list[str], title: str = "") -> str:
    if not lines:
        return ""
    head = f"<strong>{esc(title)}</strong>" if title else ""
    return f'<div class="warn">{head}<ul>' + "".join(f"<li>{esc(x)}</li>" for x in lines) + "</ul></div>"


def page(title: str, body: str, subtitle: str = "", *, heading: bool = True) -> str:
    """A whole HTML document around ``body``; ``heading``: the title also as the page's first heading."""
    sub = f'<p class="sub">{esc(subtitle)}</p>' if subtitle else ""
    from xpubench.report.base.outputs import html_comment

    return (f"<!DOCTYPE html>\n{html_comment()}\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head>"
            f"<body><main>{f'<h1>{esc(title)}</h1>' if heading else ''}{sub}{body}</main></body></html>\n")


def _table_block(block: TableBlock) -> str:
    note = f'<p class="note">{esc(block.note)}</p>' if block.note else ""
    lead = f'<p class="lead">{esc(block.lead)}</p>' if block.lead else ""
    title = f"<h3>{esc(block.title)}</h3>" if block.title else ""
    return title + lead + table_html(block.frame) + note


def unique_id(name: str, taken: set[str]) -> str:
    """An element id not yet in ``taken`` (then added to it): ``name``, else ``name-2``, ``name-3``..."""
    unique, n = name, 1
    while unique in taken:
        n += 1
        unique = f"{name}-{n}"
    taken.add(unique)
    return unique


def _chart_block(chart: Chart, taken: set[str]) -> str:
    """A chart as a figure; its id ``chart-<name>`` (a section's id is its anchor: the two never clash)."""
    figure = (f'<figure id="{esc(unique_id("chart-" + chart.name, taken))}">{image_html(chart.png, chart.title)}'
              f"<figcaption><strong>{esc(chart.title)}.</strong> {esc(chart.caption)}</figcaption></figure>")
    if chart.folded:
        return f"<details><summary>{esc(chart.title)} (click to show)</summary>{figure}</details>"
    return figure


def section_html(section: Section, taken: set[str] | None = None) -> str:
    taken = set() if taken is None else taken
    parts = [f'<section id="{esc(unique_id(section.anchor, taken))}"><h2>{esc(section.title)}</h2>']
    if section.intro:
        parts.append(f"<p>{esc(section.intro)}</p>")
    if section.bullets:
        parts.append("<ul>" + "".join(f"<li>{esc(b)}</li>" for b in section.bullets) + "</ul>")
    parts += [_table_block(t) for t in section.tables]
    parts += [_chart_block(c, taken) for c in section.charts]
    return "".join(parts) + "</section>"


def render(report: Report) -> str:
    """The whole report as one HTML document (a str)."""
    taken: set[str] = set()
    shown = [section_html(s, taken) for s in report.sections]   # ids unique on the page, sections first
    nav = "<nav>" + "".join(f'<a href="#{esc(s.anchor)}">{esc(s.title)}</a>' for s in report.sections) + "</nav>"
    body = (nav + warnings_html(report.warnings, "Read with care")
            + f'<p class="note">{esc(NOISY_LEGEND)}; n/a = not known or not measured.</p>' + "".join(shown))
    return page(report.title, body, report.subtitle)
