"""`xpubench report`: results files -> one report (content.Report) -> a self-contained HTML page or
Markdown with PNG charts beside it."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pandas as pd

from xpubench import analysis
from xpubench.errors import UserError
from xpubench.legible.units import utc_now
from xpubench.report.base.content import Report, Section, TableBlock
from xpubench.report.base.frame import ResultSet
from xpubench.report.base.table import Table
from xpubench.report.sections import SECTIONS, ReportSection
from xpubench.report.tables.environment import environment_warnings
from xpubench.version import __version__


def same_in_every_row(frame: pd.DataFrame) -> dict[str, str]:
    """{column: its one value} of the columns whose cell is the same in every row of a table of two rows or
    more (one chip, one dtype, one device): a page says it once above the table rather than on every row.
    One column is always kept."""
    if len(frame) < 2:
        return {}
    same = {str(c): str(frame[c].iloc[0]) for c in frame.columns
            if frame[c].astype(str).nunique() == 1 and str(frame[c].iloc[0]).strip()}   # a blank column says nothing
    return same if len(same) < len(frame.columns) else dict(list(same.items())[:-1])


def said_once(same: dict[str, str]) -> str:
    """"Every row: chip = AMD EPYC, dtype = fp32, compile = n/a." ("" when no column is shared)."""
    return "Every row: " + ", ".join(f"{c or 'value'} = {v}" for c, v in same.items()) + "." if same else ""


def blocks(table: Table, titled: bool = True) -> list[TableBlock]:
    """A Table as report blocks: one per part when the table is split (so it fits a page), its note under
    the last; untitled when the section's heading says what it is. A column with one value in every row is
    left out and said once above the first part."""
    same = same_in_every_row(table.frame())
    parts = table.split()
    return [TableBlock(t if titled else "", f.drop(columns=[c for c in same if c in f.columns]),
                       table.note if i == len(parts) - 1 else "", said_once(same) if i == 0 else "")
            for i, (t, f) in enumerate(parts)]


def build_section(spec: ReportSection, data: ResultSet, charts: bool = True) -> Section | None:
    """One section of the list as the report shows it, None when it has nothing to show and no ``empty``
    (without ``charts``: none drawn, so a section of charts alone has nothing to show)."""
    shown = [b for t in spec.shown_tables(data, report=True) for b in blocks(t, spec.table_titles)]
    made, bullets = spec.charts(data) if charts else [], spec.bullets(data)
    if shown or made or bullets:
        return Section(spec.title, spec.anchor, spec.intro, bullets, shown, made)
    return None if spec.empty is None else Section(spec.title, spec.anchor, spec.empty)


def build_report(loaded, *, charts: bool = True) -> Report:
    """The report's content from store.load_results output (or a list of Result): every section of
    report/sections.py marked for the report, in its order; ``charts=False`` draws none (Markdown on stdout,
    where no picture can go: each chart costs matplotlib's layout and drawing, ~0.3-1 s of CPU)."""
    data = ResultSet.load(loaded)
    frame = data.frame
    if frame.empty:
        raise UserError("no results in these files: nothing to report")
    from xpubench.report.charts.performance import plain_text

    with plain_text() if charts else contextlib.nullcontext():   # a `$` in a device name is a dollar sign, not math
        secs = [s for s in (build_section(spec, data, charts) for spec in SECTIONS if spec.report) if s is not None]
    warnings = [w for f in (loaded if isinstance(loaded, list) else []) for w in getattr(f, "warnings", [])]
    warnings += environment_warnings(data.items)
    sources = ", ".join(dict.fromkeys(str(e.path.name) for e in data.items))
    subtitle = (f"{len(frame)} cases ({int((frame['status'] == 'ok').sum())} ok) from {sources}; "
                f"written {utc_now()} by xpubench {__version__}")
    return Report("xpubench report", subtitle, secs, warnings)


def default_output(fmt: str | None) -> str:
    """The report's file when no -o is given: its name follows the format (Markdown never lands in .html)."""
    return "xpubench-report.md" if fmt == "md" else "xpubench-report.html"


def output_format(output: Path, fmt: str | None) -> str:
    if fmt is None:
        return "md" if output.suffix.lower() in (".md", ".markdown") else "html"
    if fmt not in ("html", "md"):
        raise UserError(f"unknown report format {fmt!r}; choose html or md")
    return fmt


def write_report(paths, output: Path, *, fmt: str | None = None, force: bool = False) -> Path:
    """Load the files, build the report, write it; returns the path written. Never over a results file
    or one of ``paths``, nor over a file xpubench did not write unless ``force`` (report/base/outputs.py)."""
    from xpubench.report.base.outputs import check_image_folder, check_output
    from xpubench.report.render import html, markdown
    from xpubench.results.store import write_atomically

    output = Path(output)
    fmt = output_format(output, fmt)
    check_output(output, [paths] if isinstance(paths, (str, Path)) else paths, force=force, what="the report")
    if fmt == "md":
        check_image_folder(markdown.image_folder(output), force=force)
    report = build_report(analysis.load(paths))
    text = markdown.render(report, output) if fmt == "md" else html.render(report)
    write_atomically(output, text.encode("utf-8"))
    return output
