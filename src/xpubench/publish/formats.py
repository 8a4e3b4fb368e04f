"""Machine-readable output on stdout, like llama-bench's ``-o md|csv|json|jsonl``: `xpubench run ... -o -
--format csv` and `xpubench report FILES -o - --format json` print the cases (publish/rows.py) and nothing
else (progress, warnings and notes go to stderr), so a script reads figures and a table pastes into an issue.

- ``csv``: one header line, one line per case, numbers unformatted (seconds, FLOP/s, fractions);
- ``json``: a list of the same rows; ``jsonl``: one row per line;
- ``md``: for `run`, a pipe table of the cases (figures with units); for `report`, the Markdown report
  itself (its charts left out: a chart is a file; `report -o report.md` writes them beside it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from xpubench.errors import UserError
from xpubench.publish.rows import COLUMNS, rows
from xpubench.report.base.csvfile import csv_text
from xpubench.results.schema import finite

FORMATS = ("md", "csv", "json", "jsonl")


def check_format(fmt: str | None, command: str) -> str:
    if fmt not in FORMATS:
        raise UserError(f"`xpubench {command} -o -` prints md, csv, json or jsonl: give --format with one of them")
    return fmt


def si(value, unit: str) -> str:
    """A figure with its unit; FLOP/s scaled to k/M/G/T, others with 4 significant digits; n/a for None."""
    if value is None:
        return "n/a"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale and unit.endswith("/s") and unit.startswith("FLOP"):
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.4g} {unit}".strip()


def seconds_text(value) -> str:
    """Seconds as the report prints them (ms, µs...); n/a for None."""
    from xpubench.report.base.cells import fmt_seconds

    return "n/a" if value is None else fmt_seconds(value)


def markdown_table(table: list[dict]) -> str:
    """The cases as a pipe table (text from results files escaped as the Markdown report escapes it)."""
    from xpubench.report.render.markdown import md_table

    shown = [{"case": r["key"], "device": r["device_name"] or r["device"], "status": r["status"],
              "figure": f"{r['figure']} {si(r['value'], r['unit'] or '')}" if r["figure"] else "n/a",
              "time": seconds_text(r["time_s"]),
              "95% CI": "n/a" if r["time_ci95_low_s"] is None else
              f"{seconds_text(r['time_ci95_low_s'])} - {seconds_text(r['time_ci95_high_s'])}",
              "processes": r["processes"], "noisy": "yes" if r["noisy"] else ""} for r in table]
    return md_table(pd.DataFrame(shown)) + "\n" if shown else "(no cases)\n"


def rows_text(table: list[dict], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(finite(table), indent=1, allow_nan=False) + "\n"
    if fmt == "jsonl":
        return "".join(json.dumps(finite(r), allow_nan=False) + "\n" for r in table)
    if fmt == "csv":
        return csv_text(COLUMNS, ([r.get(c) for c in COLUMNS] for r in table))
    if fmt == "md":
        return markdown_table(table)
    raise UserError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def print_results(results, fmt: str, source: str = "results") -> None:
    """`run -o -`: the run's cases (a list of Result) on stdout in ``fmt``."""
    from xpubench.report.base.frame import Entry

    items = [Entry(source, Path(source), r) for r in results]
    sys.stdout.write(rows_text(rows(items), fmt))
    sys.stdout.flush()


def report_text(paths, fmt: str) -> str:
    """`report FILES -o - --format FMT`: the Markdown report (charts left out) or the cases' rows."""
    from xpubench import analysis

    loaded = analysis.load(list(paths))
    if fmt != "md":
        table = rows(loaded)
        if not table:
            raise UserError("no results in these files: nothing to report")
        return rows_text(table, fmt)
    import tempfile

    from xpubench.report.render import markdown
    from xpubench.report.render.build import build_report

    report = build_report(loaded, charts=False)
    with tempfile.TemporaryDirectory(prefix="xpubench-md-") as tmp:   # no chart: nothing is written there
        text = markdown.render(report, Path(tmp) / "report.md")
    note = "_Charts are left out on stdout: `xpubench report FILES -o report.md` writes them beside the page._\n"
    return text + "\n" + note
