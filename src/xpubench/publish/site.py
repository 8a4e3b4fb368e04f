"""`xpubench site DIR -o site/`: a folder of results files (any machines, any dates) -> a static site that
opens from the file system or any static host (GitHub Pages): no server, no network, nothing from a CDN.

    site/index.html              machines, runs, workloads (+ machines.csv, runs.csv, workloads.csv)
    site/w/<workload>.html       every case of a workload on every machine: filters, sorting, charts (+ .csv)
    site/r/<run>.html            one results file: command, fingerprint, cases, raw samples (+ the .jsonl)
    site/r/<run>-report.html     its full report, with --reports (built once per file content)
    site/.xpubench-cache.json    what was read of each file, by its sha256: a rebuild reads only new files
    site/.xpubench-site.json     the manifest: every file above with its sha256 (publish/folder.py)

The output folder holds only what a build wrote (publish/folder.py): anything else in it (a file of one's
own, a link, a FIFO) and the build is refused before anything is read; pages of runs no longer in DIR are
removed. A file of the same content found twice (a copy, an earlier site's ``r/`` folder) is one run, and a
case found in two files (the same record: key, start, raw samples) is one row of its workload's table.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from xpubench.errors import UserError
from xpubench.legible.plaintext import shown
from xpubench.publish import folder, pages
from xpubench.publish.collect import RunRecord, collect
from xpubench.publish.tables import csv_text
from xpubench.report.render.markdown import file_stem


@dataclass(frozen=True)
class SiteSummary:
    runs: int
    cases: int
    machines: int
    workloads: int
    pages: int
    skipped: list[tuple[str, str]]
    seconds: float
    notes: list[str]


def check_output_folder(out: Path, source: Path) -> dict[str, str]:
    """What an earlier build wrote into ``out`` (publish/folder.py ``scan``); UserError (one line) unless the
    site may be written there: not inside the results folder, nor the results folder inside it."""
    if out.resolve() == source.resolve() or source.resolve() in out.resolve().parents:
        raise UserError(f"{shown(out)}: the site must not be written inside the results folder {shown(source)}")
    if out.resolve() in source.resolve().parents:
        raise UserError(f"{shown(source)}: the results folder must not lie inside the site's folder {shown(out)}")
    return folder.scan(out)


def mark_repeats(runs: list[RunRecord]) -> None:
    """A case found in an earlier file too (the same record: key, start, figures, raw samples) gets
    ``repeat_of`` (that file's name and its case's link): its workload's table and charts show it once."""
    first: dict[str, tuple[str, str]] = {}
    for run in runs:
        for i, case in enumerate(run.cases):
            same = json.dumps({k: v for k, v in case.items() if k != "source"}, sort_keys=True)
            identity = hashlib.sha256(same.encode("utf-8", "backslashreplace")).hexdigest()
            if identity in first:
                case["repeat_of"] = first[identity]
            else:
                first[identity] = (run.file, f"{run.id}.html#case-{i}")


def _report(run: RunRecord) -> str | None:
    """The run's full report (report/render/build.py) as one page, or None when it can't be built (said on the page)."""
    from xpubench import analysis
    from xpubench.report.render import html
    from xpubench.report.render.build import build_report

    try:
        return html.render(build_report(analysis.load([run.path])))
    except Exception:   # noqa: BLE001 - a contributed file never ends the build: its page says there is no report
        return None


def build_site(source: str | Path, out: str | Path, *, jobs: int | None = None, reports: bool = False,
               on_progress=None) -> SiteSummary:
    started = time.perf_counter()
    source, out = Path(source), Path(out)
    present = check_output_folder(out, source)
    cached = (out / folder.CACHE).read_bytes() if folder.CACHE in present else None
    runs, skipped, new_cache, bad_cache = collect(source, cached, jobs=jobs, on_progress=on_progress)
    notes = [f"{shown(out / folder.CACHE)} was not used ({bad_cache}): every file was read again"] if bad_cache else []
    if not runs:
        raise UserError(f"{shown(source)}: no readable results file ({len(skipped)} left out, e.g. {skipped[0][0]}: "
                        f"{skipped[0][1]})")
    mark_repeats(runs)
    site = folder.Writer(out, present)
    taken: set[str] = set()
    workloads = {w: f"w/{file_stem(w, taken)}.html"
                 for w in sorted({str(c.get("workload")) for r in runs for c in r.cases})}
    for workload, href in workloads.items():
        rows = pages.workload_rows(runs, workload)
        csv_name = href.removesuffix(".html") + ".csv"
        site.put(href, pages.workload_page(runs, workload, csv_name.removeprefix("w/")))
        site.put(csv_name, csv_text(pages.WORKLOAD_HEAD, rows))
    for run in runs:
        report_name = f"r/{run.id}-report.html"   # the name is the file's digest: kept when built before
        has_report = site.keep(report_name)
        if reports and not has_report:
            report = _report(run)
            if report is not None:
                site.put(report_name, report)
                has_report = True
        site.put(f"r/{run.id}.html", pages.run_page(run, report_name.removeprefix("r/") if has_report else None))
        site.copy(f"r/{run.id}.jsonl", run.path, run.digest)
    tables = pages.index_tables(runs, workloads)
    for name, (head, rows) in tables.items():
        site.put(f"{name}.csv", csv_text(head, rows))
    site.put("index.html", pages.index_page(tables, skipped))
    site.put(folder.CACHE, new_cache)
    site.finish()
    return SiteSummary(len(runs), sum(len(r.cases) for r in runs), len({r.machine for r in runs}), len(workloads),
                       1 + len(workloads) + len(runs), skipped, time.perf_counter() - started, notes)
