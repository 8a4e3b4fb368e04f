"""`xpubench report`: results files -> one report (content.Report) -> a self-contained HTML page or
Markdown with PNG charts beside it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from xpubench import analysis
from xpubench.errors import UserError
from xpubench.report import advice, charts, charts_training, costs, frameworks, generation, sections, tables
from xpubench.report.content import Report, Section, TableBlock
from xpubench.report.environment import differences, file_fingerprints, missing, summarize_fingerprint
from xpubench.report.frame import ResultSet, ok_rows
from xpubench.results.fingerprint import utc_now
from xpubench.version import __version__


def _tables(*blocks: tuple[str, pd.DataFrame, str]) -> list[TableBlock]:
    return [TableBlock(title, frame, note) for title, frame, note in blocks if not frame.empty]


def _model(table: tables.Table, title: str | None = None, note: str = "") -> list[TableBlock]:
    """A table of report/tables.py as blocks: one per part when the table is split (so it fits a page)."""
    if table.empty:
        return []
    parts = table.split()
    if len(parts) == 1:
        return [TableBlock(table.title if title is None else title, parts[0][1], note)]
    return [TableBlock(t, f, note if i == len(parts) - 1 else "") for i, (t, f) in enumerate(parts)]


def _charts(*made) -> list:
    return [c for c in made if c is not None]


def _peak_note(frame: pd.DataFrame) -> str:
    if "peak_warning" not in frame or frame["peak_warning"].dropna().empty:
        return ""
    warning = str(frame["peak_warning"].dropna().iloc[0])
    return f"{warning[:1].upper()}{warning[1:]}."


def environment_table(data: ResultSet) -> pd.DataFrame:
    """Rows = facts (host, CPU, framework versions, devices, drivers...), one column per file."""
    columns = {}
    for source, fps in file_fingerprints(data.items).items():
        for i, fp in enumerate(fps or [{}]):
            columns[source if i == 0 else f"{source} #{i + 1}"] = summarize_fingerprint(fp)
    table = pd.DataFrame(columns)
    table = table.apply(lambda row: row.fillna(missing(str(row.name))), axis=1)
    return table.reset_index(names="")


def environment_warnings(data: ResultSet) -> list[str]:
    fps = file_fingerprints(data.items)
    names = list(fps)
    if len(names) < 2:
        return []
    lines = []
    for other in names[1:]:
        diff = differences((fps[names[0]] or [{}])[0], (fps[other] or [{}])[0], (names[0], other))
        if diff:
            lines.append(f"{other} ran in another environment than {names[0]}: " + "; ".join(diff))
    return lines


def build_report(loaded) -> Report:
    """The report's content from store.load_results output (or a list of Result)."""
    data = ResultSet.load(loaded)
    frame = data.frame
    if frame.empty:
        raise UserError("no results in these files: nothing to report")
    secs: list[Section] = []
    bullets = advice.advice(data)
    secs.append(Section("Which device for what", "advice", intro=(
        "Written from the measurements below. A difference is called only when the 95% interval of the "
        "ratio (a bootstrap over the worker processes, then the samples within them) excludes 1, the change "
        "is at least 5%, and every process of the slower case was slower than every process of the faster "
        "one." if bullets else
        "No case finished ok: nothing to advise."), bullets=bullets))
    if not ok_rows(frame, "train").empty:
        secs.append(Section("Training", "training", intro=(
            "Compile and the first epoch are apart from the steady state: epoch = median over epochs 2+, "
            "step = median steady step (IQR beside it)."),
            tables=_model(tables.training_table(frame)) + _tables(
                ("Epoch time and step/sample time by batch size x device", sections.batch_pivot(frame), "")),
            charts=_charts(charts.throughput_chart(frame), charts.batch_chart(frame),
                           charts_training.curves_chart(frame, data.items),
                           charts_training.curves_chart(frame, data.items, synthetic=True))))
    if not ok_rows(frame, "matmul").empty:
        secs.append(Section("Matrix multiply", "matmul", intro=(
            "Cold = the first product (compile, library and thread-pool start included); warm = median of "
            "calibrated windows after warm-up. % of peak against the chip's dense peak (CPU: an estimate)."),
            tables=_model(tables.matmul_table(frame), note=_peak_note(frame)),
            charts=_charts(charts.matmul_chart(frame))))
    secs += [s for s in [costs.section(data)] if s is not None]   # efficiency, energy, cost (report/costs.py)
    speedups = tables.speedup_table(frame)
    secs.append(Section("Speedup over the CPU", "speedup", intro=(
        "Each accelerator case over the same case on the CPU (same file when it has one). Matmul: FLOP/s "
        "ratios; training: cold = first-epoch time ratio, warm = steady samples/s ratio." if not speedups.empty
        else "No accelerator case with a matching CPU case in these files: no speedup to show."),
        tables=_model(speedups, "")))
    fw = sections.framework_table(data)
    if not fw.empty:
        secs.append(Section("PyTorch against JAX", "frameworks", intro=(
            "The same case in both frameworks on the same device: ratio of median times as a speed ratio "
            "(> 1: JAX faster), 95% bootstrap interval over the worker processes and their samples."),
            tables=_tables(("", fw, ""))))
    secs += [s for s in [frameworks.keras_section(frame)] if s]   # Keras beside native (report/frameworks.py)
    if not ok_rows(frame, "infer").empty:
        secs.append(Section("Inference and precision", "inference", intro=(
            "Latency of one synchronised batch; throughput of a full pass over the evaluation set; quality "
            "of the converted model and its change against fp32 on the same samples."),
            tables=_model(tables.inference_table(frame), ""), charts=_charts(charts.inference_chart(frame))))
    secs += [s for s in (generation.generation_section(frame),) if s]
    scaling = tables.scaling_table(frame)
    if not scaling.empty:
        secs.append(Section("Data-parallel scaling", "scaling", tables=_model(scaling, ""),
                            charts=_charts(charts.scaling_chart(frame))))
    gallery = charts_training.gallery_charts(frame, data.items)
    if gallery:
        secs.append(Section("Misclassified test images", "gallery", intro=(
            "Image classifiers trained on real data: the test images the model got wrong, most confident "
            "mistakes first."), charts=gallery))
    secs.append(Section("Spread of every figure", "spread", intro=(
        "The raw samples behind each headline figure, at both levels: each case ran in several worker "
        "processes; the figure is the median of their medians, its 95% interval a bootstrap over processes "
        "then samples. ! marks a figure the harness flagged (CV >= 10%, fewer than 3 samples, a cut time "
        "budget, or processes that disagree)."), tables=_tables(("", sections.spread_table(data), ""))))
    disagree = sections.disagreement_table(data)
    if not disagree.empty:
        secs.append(Section("Processes that disagreed", "disagreement", intro=(
            "Cases whose worker processes disagreed far more than the samples inside each process: the "
            "machine's state changed between processes (another job, the hypervisor, thread placement). "
            "What the machine was doing around each process: load average, clock, steal time (on a VM)."),
            tables=_tables(("", disagree, ""))))
    failed = tables.status_table(frame)
    if not failed.empty:
        secs.append(Section("Cases that did not finish ok", "failed", tables=_model(failed, "")))
    secs.append(Section("Environments", "environments", intro="Where and with what each file was measured.",
                        tables=_tables(("", environment_table(data), ""))))
    warnings = [w for f in (loaded if isinstance(loaded, list) else []) for w in getattr(f, "warnings", [])]
    warnings += environment_warnings(data)
    sources = ", ".join(dict.fromkeys(str(e.path.name) for e in data.items))
    subtitle = (f"{len(frame)} cases ({int((frame['status'] == 'ok').sum())} ok) from {sources}; "
                f"written {utc_now()} by xpubench {__version__}")
    return Report("xpubench report", subtitle, secs, warnings)


def output_format(output: Path, fmt: str | None) -> str:
    if fmt is None:
        return "md" if output.suffix.lower() in (".md", ".markdown") else "html"
    if fmt not in ("html", "md"):
        raise UserError(f"unknown report format {fmt!r}; choose html or md")
    return fmt


def write_report(paths, output: Path, *, fmt: str | None = None, force: bool = False) -> Path:
    """Load the files, build the report, write it; returns the path written. Never over a results file
    or one of ``paths``, nor over a file xpubench did not write unless ``force`` (report/outputs.py)."""
    from xpubench.report import html, markdown
    from xpubench.report.outputs import check_output

    output = Path(output)
    fmt = output_format(output, fmt)
    check_output(output, [paths] if isinstance(paths, (str, Path)) else paths, force=force, what="the report")
    report = build_report(analysis.load(paths))
    text = markdown.render(report, output) if fmt == "md" else html.render(report)
    output.write_text(text, encoding="utf-8")
    return output
