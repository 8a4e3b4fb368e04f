"""A report as Markdown, its charts as PNG files in a folder beside it (``report.md`` + ``report_files/``,
file names made safe by ``file_stem``).

Text from results files is made inert: characters Markdown or embedded HTML would interpret
(``| < > [ ] * ` $ \\``) are escaped, so a device name can neither break a table nor inject markup.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from xpubench.legible.plaintext import shown
from xpubench.report.base.content import NOISY_LEGEND, Report
from xpubench.report.base.outputs import html_comment
from xpubench.results.store import write_atomically

_SPECIAL = re.compile(r"([\\`*\[\]|<>$])")


def md_escape(value) -> str:
    text = "n/a" if value is None else str(value)
    text = shown(" ".join(text.split()))  # no newline may end a table row early; no raw ESC reaches it
    return _SPECIAL.sub(r"\\\1", text).replace("&", "&amp;")


def md_table(frame: pd.DataFrame) -> str:
    """A pipe table; cells escaped. (pandas' to_markdown needs the tabulate package, not a dependency.)"""
    cols = [md_escape(c) for c in frame.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in frame.itertuples(index=False):
        cells = ["" if v is None or (isinstance(v, float) and pd.isna(v)) else md_escape(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def md_bullets(lines: list[str], prefix: str = "- ") -> str:
    return "\n".join(prefix + md_escape(x) for x in lines)


def file_stem(name: str, taken: set[str]) -> str:
    """A chart's file name inside the ``_files`` folder: letters, digits, ``_ - .`` only (a workload name
    from a results file, ``/../..`` included, can never leave the folder), unique within ``taken``."""
    from xpubench.report.render.html import unique_id

    return unique_id(re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip(".-")[:80] or "chart", taken)


def image_folder(output: Path) -> Path:
    return output.with_name(output.stem + "_files")


def render(report: Report, output: Path) -> str:
    """The Markdown text; writes every chart as ``<output stem>_files/<name>.png`` and links it."""
    folder = image_folder(output)
    folder.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    parts = [html_comment(), f"# {md_escape(report.title)}", "", md_escape(report.subtitle), ""]
    if report.warnings:
        parts += ["**Read with care:**", "", md_bullets(report.warnings), ""]
    parts += [f"_{md_escape(NOISY_LEGEND)}; n/a = not known or not measured._", ""]
    for section in report.sections:
        parts += [f"## {md_escape(section.title)}", ""]
        if section.intro:
            parts += [md_escape(section.intro), ""]
        if section.bullets:
            parts += [md_bullets(section.bullets), ""]
        for block in section.tables:
            if block.title:
                parts += [f"### {md_escape(block.title)}", ""]
            if block.lead:
                parts += [md_escape(block.lead), ""]
            parts += [md_table(block.frame), ""]
            if block.note:
                parts += [f"_{md_escape(block.note)}_", ""]
        for chart in section.charts:
            path = folder / f"{file_stem(chart.name, taken)}.png"
            write_atomically(path, chart.png)   # never through a link (outputs.check_image_folder)
            parts += [f"![{md_escape(chart.title)}]({folder.name}/{path.name})", "",
                      f"**{md_escape(chart.title)}.** {md_escape(chart.caption)}", ""]
    return "\n".join(parts).rstrip() + "\n"
