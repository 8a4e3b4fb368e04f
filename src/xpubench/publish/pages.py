"""The site's pages as HTML text: the index (machines, runs, workloads, files left out), one page per
workload (every case of it on every machine, filters, sorting, CSV, charts over time) and one per run
(its command, environment fingerprint, cases, raw samples, the report). Every text from a results file goes
through the report's ``esc``; file names of pages come from digests and ``file_stem``, never raw text."""

from __future__ import annotations

import json
import shlex
from collections import defaultdict

from xpubench.publish.assets import page
from xpubench.publish.collect import RunRecord
from xpubench.publish.formats import seconds_text, si
from xpubench.publish.svg import Point, chart
from xpubench.publish.tables import Cell, csv_links, filter_form, html_table
from xpubench.report.render.html import esc

MAX_CHARTS = 24


def shown_cases(run: RunRecord):
    """(index, case) of the run's cases that no earlier file holds too (site.py ``mark_repeats``)."""
    return ((i, c) for i, c in enumerate(run.cases) if not c.get("repeat_of"))


def run_href(run: RunRecord, root: str = "../r/") -> str:
    return f"{root}{run.id}.html"   # an id is the digest's hex (publish/collect.py); escaped where it is written


def case_href(run: RunRecord, i: int) -> str:
    return f"{run_href(run)}#case-{i}"


def figure_cell(case: dict, href: str) -> Cell:
    if case.get("value") is None:
        return Cell(case.get("status") or "n/a", sort=-1, href=href, raw="")
    return Cell(si(case["value"], case.get("unit") or ""), sort=case["value"], href=href, raw=case["value"])


def time_cell(case: dict) -> Cell:
    t = case.get("time_s")
    return Cell(seconds_text(t), sort=t if t is not None else -1, raw="" if t is None else t)


def compile_cell(case: dict) -> Cell:
    """The compilation each worker process paid before its first timed step; "-" where none was apart."""
    t = case.get("compile_s")
    return Cell("-" if t is None else seconds_text(t), sort=t if t is not None else -1, raw="" if t is None else t)


def workload_rows(runs: list[RunRecord], workload: str) -> list[tuple[dict, list]]:
    rows = []
    for run in runs:
        for i, case in shown_cases(run):
            if case.get("workload") != workload:
                continue
            href = case_href(run, i)
            attrs = {"device": case.get("device_name") or case.get("device") or "n/a",
                     "framework": case.get("backend") or "n/a", "precision": case.get("precision") or "n/a",
                     "date": run.date[:10]}
            rows.append((attrs, [
                Cell(run.date[:16].replace("T", " ") or "n/a", sort=run.date or ""), run.machine_label,
                attrs["device"], attrs["framework"], attrs["precision"], case.get("mode") or "n/a",
                case.get("setting") or "", figure_cell(case, href), time_cell(case), compile_cell(case),
                Cell(str(case.get("processes") or 0), sort=case.get("processes") or 0),
                Cell(case.get("status") or "n/a", cls="" if case.get("status") == "ok" else "failed"),
                Cell(run.file, href=run_href(run)),
            ]))
    return rows


WORKLOAD_HEAD = ["date (UTC)", "machine", "device", "framework", "precision", "mode", "setting", "figure", "time",
                 "compile", "processes", "status", "results file"]


def series(runs: list[RunRecord], workload: str) -> dict[str, dict[str, list[Point]]]:
    """{case key: {machine label: points over time}} of the workload's ok cases with a figure."""
    out: dict[str, dict[str, list[Point]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        for i, case in shown_cases(run):
            if case.get("workload") != workload or case.get("value") is None or not run.date:
                continue
            label = f"{run.machine_label}, {run.date[:16].replace('T', ' ')}: {si(case['value'], case['unit'] or '')}"
            out[case["key"]][run.machine_label].append(Point(run.date, float(case["value"]), case.get("time_s"),
                                                             case.get("process_samples") or [],
                                                             case_href(run, i), label))
    return out


def charts_html(runs: list[RunRecord], workload: str) -> str:
    found = series(runs, workload)
    units = {c["key"]: c.get("unit") or "" for r in runs for c in r.cases if c.get("key") in found}
    ranked = sorted(((sum(len(p) for p in m.values()), key) for key, m in found.items()
                     if sum(len(p) for p in m.values()) >= 2), key=lambda t: (-t[0], t[1]))
    if not ranked:
        return "<p class=\"note\">No chart: no case of this workload was measured twice with a figure.</p>"
    parts = [('<p class="note">Each case\'s headline figure over time, one line per machine (higher is faster '
             "for rates). A large ringed point changed against that machine's previous run: red slower, green "
             "faster, drawn only where both runs had 2+ processes, every process of one beyond every process "
             "of the other, and the change was 5% or more (the gate's rule, docs/sharing.md).</p>")]
    for _, key in ranked[:MAX_CHARTS]:
        parts.append(f"<h3>{esc(key)}</h3>" + chart(key, units[key], found[key]))
    if len(ranked) > MAX_CHARTS:
        parts.append(f'<p class="note">{len(ranked) - MAX_CHARTS} more cases measured over time are in the '
                     "table (the charts show the most measured ones).</p>")
    return "".join(parts)


def workload_page(runs: list[RunRecord], workload: str, csv_name: str) -> str:
    rows = workload_rows(runs, workload)
    choices = {name: sorted({attrs[name] for attrs, _ in rows}) for name in ("device", "framework", "precision")}
    body = (f'<p class="lead">Every case of {esc(workload)} in every results file: {len(rows)} rows. Filter, '
            "click a column head to sort, follow a figure to its run.</p>"
            + filter_form("cases", choices) + csv_links("cases", csv_name)
            + html_table("cases", WORKLOAD_HEAD, rows) + "<h2>Over time</h2>" + charts_html(runs, workload))
    return page(f"{workload}: every machine", body, root="../")


def index_tables(runs: list[RunRecord], workloads: dict[str, str]) -> dict[str, tuple[list[str], list]]:
    machines: dict[str, list[RunRecord]] = defaultdict(list)
    for run in runs:
        machines[run.machine_label].append(run)
    machine_rows = [({}, [label, ", ".join(rs[-1].chips) or "n/a", Cell(str(len(rs)), sort=len(rs)),
                         Cell(rs[0].date[:10] or "n/a", sort=rs[0].date),
                         Cell(rs[-1].date[:10] or "n/a", sort=rs[-1].date),
                         ", ".join(sorted({r.xpubench for r in rs}))])
                    for label, rs in sorted(machines.items())]
    run_rows = [({"date": run.date[:10]}, [
        Cell(run.date[:16].replace("T", " ") or "n/a", sort=run.date), run.machine_label,
        Cell(run.file, href=run_href(run, "r/")), Cell(str(len(run.cases)), sort=len(run.cases)),
        Cell(str(sum(c.get("status") == "ok" for c in run.cases)),
             sort=sum(c.get("status") == "ok" for c in run.cases)),
        ", ".join(sorted({str(c.get("workload")) for c in run.cases})), run.xpubench]) for run in reversed(runs)]
    counts: dict[str, int] = defaultdict(int)
    for run in runs:
        for _, case in shown_cases(run):
            counts[str(case.get("workload"))] += 1
    workload_rows = [({}, [Cell(w, href=href), Cell(str(counts[w]), sort=counts[w])])
                     for w, href in sorted(workloads.items())]
    return {"machines": (["machine", "chips", "runs", "first", "last", "xpubench"], machine_rows),
            "runs": (["date (UTC)", "machine", "results file", "cases", "ok", "workloads", "xpubench"], run_rows),
            "workloads": (["workload", "cases"], workload_rows)}


def index_page(tables: dict, skipped: list[tuple[str, str]]) -> str:
    parts = [('<p class="lead">Results of <code>xpubench run</code> from many machines and dates. '
              "Every figure links to its run: the command, the environment, the raw samples.</p>")]
    for name in ("workloads", "machines", "runs"):
        head, rows = tables[name]
        parts.append(f"<h2>{esc(name.capitalize())}</h2>" + csv_links(name, f"{name}.csv")
                     + html_table(name, head, rows))
    if skipped:
        parts.append("<h2>Files left out</h2><ul>" + "".join(f"<li>{esc(f)}: {esc(why)}</li>" for f, why in skipped)
                     + "</ul>")
    return page("xpubench results", "".join(parts))


def _message(case: dict) -> str:
    repeat = case.get("repeat_of")
    same = f"the same record as in {repeat[0]} (its workload's page shows it from there)" if repeat else ""
    return "; ".join(filter(None, [case.get("message") or "", same]))


def run_page(run: RunRecord, report_href: str | None) -> str:
    head = ["#", "case", "status", "figure", "time", "95% CI", "compile", "processes", "samples", "message"]
    rows = []
    for i, c in enumerate(run.cases):
        ci = ("n/a" if c.get("time_ci95_low_s") is None
              else f"{seconds_text(c['time_ci95_low_s'])} - {seconds_text(c['time_ci95_high_s'])}")
        rows.append(({}, [Cell(str(i), sort=i), Cell(c.get("key") or "n/a", href=f"#case-{i}"), c.get("status"),
                          figure_cell(c, f"#case-{i}"), time_cell(c), ci, compile_cell(c),
                          Cell(str(c.get("processes")), sort=c.get("processes") or 0),
                          Cell(str(c.get("samples")), sort=c.get("samples") or 0), _message(c)]))
    report = (f'<p><a href="{esc(report_href)}">The report of this run</a> (xpubench report, built with the site).</p>'
              if report_href else "")
    copies = f"; the same file also as {esc(', '.join(run.copies))}" if run.copies else ""
    facts = [("results file", f'<a href="{esc(run.id)}.jsonl">{esc(run.file)}</a> (sha256 {esc(run.digest)}{copies})'),
             ("machine", esc(run.machine_label)), ("started", esc(run.date or "n/a")),
             ("xpubench", esc(run.xpubench)), ("git", esc(run.git))]
    parts = ["<table>" + "".join(f"<tr><th class=\"text\">{k}</th><td class=\"text\">{v}</td></tr>" for k, v in facts)
             + "</table>", report,
             ("<h2>Command</h2><p class=\"note\">A results file does not record its command line. The report of the "
             f"file: <code>xpubench report {esc(shlex.quote(run.file))}</code>. "
             "Each case again (real data is read from the default data folder):</p>"),
             "<pre>" + esc("\n".join(dict.fromkeys(c["rerun"] for c in run.cases))) + "</pre>",
             "<h2>Cases</h2>" + csv_links("run-cases", f"{run.id}.csv", every_row=False)
             + html_table("run-cases", head, rows),
             "<h2>Raw samples</h2>"]
    for i, c in enumerate(run.cases):
        groups = c.get("process_samples") or []
        text = "\n".join(f"process {p + 1}: " + ", ".join(f"{v:.6g}" for v in g) for p, g in enumerate(groups))
        parts.append(f'<details id="case-{i}"><summary>{esc(c.get("key"))}: {esc(c.get("timing") or "no samples")} '
                     f"(seconds), workload options {esc(c.get('options'))}</summary><pre>{esc(text or 'none')}</pre>"
                     "</details>")
    parts.append("<h2>Environment fingerprint</h2><details><summary>as recorded (JSON)</summary><pre>"
                 + esc(json.dumps(run.fingerprint, indent=1, sort_keys=True)) + "</pre></details>")
    return page(f"run {run.file}", "".join(parts), root="../")
