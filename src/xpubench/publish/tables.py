"""The site's tables: sortable HTML (every cell's text escaped by the report's ``esc``, numbers sorted by a
``data-sort`` value), a filter form above a workload's table, and the same rows as a CSV file."""

from __future__ import annotations

from dataclasses import dataclass

from xpubench.legible.plaintext import shown
from xpubench.report.base import csvfile
from xpubench.report.render.html import esc


@dataclass(frozen=True)
class Cell:
    text: str
    sort: float | str | None = None   # the value a column sorts by (default: the text)
    href: str | None = None
    cls: str = ""
    raw: object = None                 # the value the CSV file holds (default: the text)


def cell(value, **kw) -> Cell:
    return value if isinstance(value, Cell) else Cell("n/a" if value is None else str(value), **kw)


def html_table(table_id: str, head: list[str], rows: list[tuple[dict, list]]) -> str:
    """``rows``: (the row's data attributes, its cells). Text columns are left-aligned."""
    ths = "".join(f'<th class="text" scope="col">{esc(h)}</th>' for h in head)
    body = []
    for attrs, cells in rows:
        data = "".join(f' data-{k}="{esc(v)}"' for k, v in attrs.items())
        tds = []
        for c in map(cell, cells):
            sort = f' data-sort="{esc(c.sort)}"' if c.sort is not None else ""
            cls = esc(" ".join(filter(None, [c.cls, "" if c.sort is not None else "text"])))
            text = f'<a href="{esc(c.href)}">{esc(c.text)}</a>' if c.href else esc(c.text)
            tds.append(f'<td class="{cls}"{sort}>{text}</td>')
        body.append(f"<tr{data}>{''.join(tds)}</tr>")
    return (f'<div class="scroll"><table id="{esc(table_id)}" class="sortable"><thead><tr>{ths}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


def csv_text(head: list[str], rows: list[tuple[dict, list]]) -> str:
    """The rows' CSV (report/base/csvfile.py: every CSV xpubench writes), its text as the pages show it."""
    return csvfile.csv_text(head, ([_shown(c.raw if c.raw is not None else c.text) for c in map(cell, cells)]
                                   for _, cells in rows))


def _shown(value):
    return shown(value) if isinstance(value, str) else value


def csv_links(table_id: str, csv_name: str, *, every_row: bool = True) -> str:
    """The script's "CSV of the shown rows" button, and a link to the table's CSV file (``every_row``)."""
    link = f'<a class="csvfile" href="{esc(csv_name)}">CSV of every row</a>' if every_row else ""
    return (f'<button type="button" class="csv" data-table="{esc(table_id)}" data-name="{esc(csv_name)}">'
            f"CSV of the shown rows</button>{link}")


def filter_form(table_id: str, choices: dict[str, list[str]]) -> str:
    """Selects named after the rows' data attributes (device, framework, precision) and a date range."""
    parts = [f'<form class="filters" data-table="{esc(table_id)}" data-count="{esc(table_id)}-count">']
    for name, values in choices.items():
        options = "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in values)
        parts.append(f'<label>{esc(name)}<select name="{esc(name)}"><option value="">all</option>{options}'
                     "</select></label>")
    parts.append('<label>from<input type="date" name="from"></label><label>to<input type="date" name="to">'
                 f'</label><span class="count" id="{esc(table_id)}-count"></span></form>')
    return "".join(parts)
