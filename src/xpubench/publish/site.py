"""`xpubench site DIR -o site/`: a folder of results files (any machines, any dates) -> a static site that
opens from the file system or any static host (GitHub Pages): no server, no network, nothing from a CDN.

    site/index.html              machines, runs, workloads (+ machines.csv, runs.csv, workloads.csv)
    site/w/<workload>.html       every case of a workload on every machine: filters, sorting, charts (+ .csv)
    site/r/<run>.html            one results file: command, fingerprint, cases, raw samples (+ the .jsonl)
    site/r/<run>-report.html     its full report, with --reports (built once per file content)
    site/.xpubench-cache.json    what was read of each file, by its sha256: a rebuild reads only new files

The output folder is refused when it holds files xpubench did not write (a page without the generator
mark), so a typo never overwrites a folder of one's own; pages of runs no longer in DIR are removed.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from xpubench.errors import UserError
from xpubench.publish import pages
from xpubench.publish.collect import RunRecord, collect
from xpubench.publish.tables import csv_text
from xpubench.report.base.outputs import written_by_xpubench
from xpubench.report.render.markdown import file_stem

CACHE = ".xpubench-cache.json"
OURS = {"index.html", "machines.csv", "runs.csv", "workloads.csv", "w", "r", CACHE}


@dataclass(frozen=True)
class SiteSummary:
    runs: int
    cases: int
    machines: int
    workloads: int
    pages: int
    skipped: list[tuple[str, str]]
    seconds: float


def check_output_folder(out: Path, source: Path) -> None:
    """UserError (one line) unless ``out`` may be (re)written: a new or empty folder, or an earlier site."""
    if out.resolve() == source.resolve() or source.resolve() in out.resolve().parents:
        raise UserError(f"{out}: the site must not be written inside the results folder {source}")
    if not out.exists():
        return
    if out.is_symlink() or not out.is_dir():
        raise UserError(f"{out}: not a folder (the site is a folder of pages); choose another -o")
    foreign = [p.name for p in out.iterdir() if p.name not in OURS]
    index = out / "index.html"
    if foreign or (index.exists() and not written_by_xpubench(index)):
        raise UserError(f"{out} holds files xpubench did not write ({', '.join(sorted(foreign)[:3]) or 'index.html'}):"
                        " choose an empty or new folder for the site")


def _write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)


def _unique_ids(runs: list[RunRecord]) -> None:
    """Two files of the same content share a digest: the second gets "-2" (pages stay one per file)."""
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.id] = seen.get(run.id, 0) + 1
        if seen[run.id] > 1:
            run.id = f"{run.id}-{seen[run.id]}"


def _report(source: Path, run: RunRecord) -> str | None:
    """The run's full report (report/render/build.py) as one page, or None when it can't be built (said on the page)."""
    from xpubench import analysis
    from xpubench.report.render import html
    from xpubench.report.render.build import build_report

    try:
        return html.render(build_report(analysis.load([source / run.file])))
    except UserError:
        return None


def build_site(source: str | Path, out: str | Path, *, jobs: int | None = None, reports: bool = False,
               on_progress=None) -> SiteSummary:
    started = time.perf_counter()
    source, out = Path(source), Path(out)
    check_output_folder(out, source)
    runs, skipped = collect(source, out / CACHE, jobs=jobs, on_progress=on_progress)
    if not runs:
        raise UserError(f"{source}: no readable results file ({len(skipped)} left out, e.g. {skipped[0][0]}: "
                        f"{skipped[0][1]})")
    _unique_ids(runs)
    taken: set[str] = set()
    workloads = {w: f"w/{file_stem(w, taken)}.html"
                 for w in sorted({str(c.get("workload")) for r in runs for c in r.cases})}
    written = {out / "index.html"}
    for workload, href in workloads.items():
        path = out / href
        rows = pages.workload_rows(runs, workload)
        _write(path, pages.workload_page(runs, workload, path.with_suffix(".csv").name))
        _write(path.with_suffix(".csv"), csv_text(pages.WORKLOAD_HEAD, rows))
        written |= {path, path.with_suffix(".csv")}
    for run in runs:
        report_page = out / "r" / f"{run.id}-report.html"   # the name is the file's digest: kept when built before
        if reports and not report_page.is_file():
            report = _report(source, run)
            if report is not None:
                _write(report_page, report)
        _write(out / "r" / f"{run.id}.html", pages.run_page(run, report_page.name if report_page.is_file() else None))
        _copy(source / run.file, out / "r" / f"{run.id}.jsonl")
        written |= {out / "r" / f"{run.id}{s}" for s in (".html", "-report.html", ".jsonl")}
    tables = pages.index_tables(runs, workloads)
    for name, (head, rows) in tables.items():
        _write(out / f"{name}.csv", csv_text(head, rows))
    _write(out / "index.html", pages.index_page(tables, skipped))
    for folder in (out / "w", out / "r"):   # pages of files no longer in the folder
        for stale in folder.iterdir():
            if stale not in written and stale.is_file():
                stale.unlink()
    return SiteSummary(len(runs), sum(len(r.cases) for r in runs), len({r.machine for r in runs}), len(workloads),
                       1 + len(workloads) + len(runs), skipped, time.perf_counter() - started)


def _copy(source: Path, target: Path) -> None:
    """The results file beside its page (a static host serves it); unchanged copies are left alone."""
    try:
        st, have = source.stat(), target.stat()
        if have.st_size == st.st_size and have.st_mtime_ns >= st.st_mtime_ns:
            return
    except FileNotFoundError:
        pass
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
