"""The one ordered list of report sections. `xpubench run --verbose` (report/render/terminal.py) prints the tables
of every section marked ``terminal``; `xpubench report` (report/render/build.py) shows every section marked
``report``, with its charts and bullets. Neither keeps a list of its own.

A section returns one shape: ``Table``s (report/base/table.py) and, for the report, ``Chart``s and
sentences; it is shown when it has any, else left out (or, with ``empty``, shown with that intro alone).
A new section: its tables and charts in a module of this package, and one ``register(ReportSection(...))``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from xpubench.report.base.content import Chart
from xpubench.report.base.frame import ResultSet
from xpubench.report.base.table import Table, text_table
from xpubench.report.charts import generation as generation_charts
from xpubench.report.charts import performance, roofline, training
from xpubench.report.charts import serving as serving_charts
from xpubench.report.charts import target as target_chart
from xpubench.report.sentences import advice
from xpubench.report.tables import cases, costs, frameworks, generation, llm, serving, spread, target
from xpubench.report.tables.environment import environment_tables


def _nothing(data: ResultSet) -> list:
    return []


@dataclass(frozen=True)
class ReportSection:
    title: str
    anchor: str                                                       # the HTML id, the Markdown file stem
    tables: Callable[[ResultSet], list[Table]] = _nothing             # wherever the section is shown
    charts: Callable[[ResultSet], list[Chart]] = _nothing             # the report only (no pictures in a terminal)
    report_tables: Callable[[ResultSet], list[Table]] = _nothing      # the report only (too wide for a terminal)
    bullets: Callable[[ResultSet], list[str]] = _nothing              # the report only
    text: Callable[[ResultSet], list[str]] = _nothing                 # the terminal only: its charts as text
    intro: str = ""
    empty: str | None = None   # shown with this intro when it has nothing to show; None: left out
    terminal: bool = True      # printed by `xpubench run --verbose`
    always: bool = False       # printed by every `xpubench run`, after the summary (not only --verbose)
    report: bool = True        # in the HTML / Markdown report
    table_titles: bool = True  # the report heads each table with its title (else the section's title suffices)

    def shown_tables(self, data: ResultSet, *, report: bool) -> list[Table]:
        """The section's non-empty tables (with the report's own when ``report``)."""
        made = self.tables(data) + (self.report_tables(data) if report else [])
        return [t for t in made if not t.empty]


def _made(*makers: Callable[[pd.DataFrame], object]) -> Callable[[ResultSet], list]:
    """A section part from functions of the results frame, each returning a Table or Chart (or None)."""
    return lambda data: [x for x in (make(data.frame) for make in makers) if x is not None]


def _sentences(lines: list[str]) -> list[str]:
    """The terminal answer's lines (report/tables/serving.py: "for llama-server ...") as the report's bullets
    write them: a capital first, a full stop last."""
    return [line[:1].upper() + line[1:] + ("" if line.endswith(".") else ".") for line in lines]


SECTIONS: list[ReportSection] = []


def register(section: ReportSection, *, before: str | None = None) -> ReportSection:
    """Add a section at the end of the list (or before the one whose anchor is ``before``); a section with
    the same anchor is replaced in place."""
    at = next((i for i, s in enumerate(SECTIONS) if s.anchor == section.anchor), None)
    if at is not None:
        SECTIONS[at] = section
        return section
    where = next((i for i, s in enumerate(SECTIONS) if s.anchor == before), len(SECTIONS))
    SECTIONS.insert(where, section)
    return section


def section(anchor: str) -> ReportSection:
    """The section of the list with this anchor (KeyError naming it when there is none)."""
    found = next((s for s in SECTIONS if s.anchor == anchor), None)
    if found is None:
        raise KeyError(f"no report section {anchor!r}")
    return found


def tables_of(loaded) -> dict[str, pd.DataFrame]:
    """For a notebook: every non-empty table of results (paths, store.load_results output or a list of
    Result) as DataFrames of formatted strings, by title (a table without one: its section's)."""
    from xpubench import analysis

    if isinstance(loaded, (str, bytes)) or hasattr(loaded, "__fspath__"):
        loaded = [loaded]
    loaded = list(loaded)
    if loaded and (isinstance(loaded[0], str) or hasattr(loaded[0], "__fspath__")):
        loaded = analysis.load(loaded)
    data = ResultSet.load(loaded)
    if data.frame.empty:
        return {}
    return {t.title or s.title: t.frame() for s in SECTIONS for t in s.shown_tables(data, report=s.report)}


register(ReportSection(
    "Which device for what", "advice", terminal=False,
    bullets=lambda data: advice.advice(data) + _sentences(serving.answer_lines(data.frame)), intro=(
        "Written from the measurements below. A difference is called only when the 95% interval of the "
        "ratio (a bootstrap over the worker processes, then the samples within them) excludes 1, the change "
        "is at least 5%, and every process of the slower case was slower than every process of the faster "
        "one."), empty="No case finished ok: nothing to advise."))
register(ReportSection(
    "Serving", "serving", tables=_made(serving.serving_table), bullets=lambda data: _sentences(
        serving.answer_lines(data.frame)),
    charts=_made(serving_charts.latency_chart, serving_charts.pareto_chart), intro=(
        "xpubench serve (docs/serving.md): streamed requests to an OpenAI-compatible server, timed on the client. "
        "TTFT = sent to the first chunk with text; TPOT = (E2E - TTFT) / (output tokens - 1) per request; ITL = "
        "every gap between consecutive chunks; E2E = sent to the stream's end; as vLLM's bench serve defines them "
        "(AIPerf calls TPOT inter-token latency). Output tok/s over the point's window (vLLM's and AIPerf's output "
        "token throughput); per user: a user's output tokens over the time their requests were open, the wait for "
        "the first token included (at 1 user, the total); per user streaming: 1 / TPOT (AIPerf's output token "
        "throughput per user, the wait left out); failures counted.")))
register(ReportSection(
    "Training", "training", tables=_made(cases.training_table),
    report_tables=lambda data: [text_table("Epoch time and step/sample time by batch size x device",
                                           cases.batch_pivot(data.frame))],
    charts=lambda data: [c for c in (performance.throughput_chart(data.frame), performance.batch_chart(data.frame),
                                     training.curves_chart(data.frame, data.items),
                                     training.curves_chart(data.frame, data.items, synthetic=True)) if c],
    intro=("Compile and the first epoch are apart from the steady state: epoch = median over epochs 2+, "
           "step = median steady step (IQR beside it).")))
register(ReportSection(
    "Time to target", "target", tables=lambda data: [target.target_table(data.frame)],
    charts=lambda data: [c for c in (target_chart.curves_chart(data),) if c],
    bullets=lambda data: target.ranking_lines(data) + target.sweep_lines(data), text=target.curve_lines,
    always=True, table_titles=False, intro=(
        "Training until the validation metric reaches the target, several seeds per setup (one worker process "
        "each). The clock runs from the first training step to the end of the evaluation that reached the "
        "target: evaluations on it, set-up and compilation off it, as MLPerf Training counts.")))
register(ReportSection(
    "Matrix multiply", "matmul", tables=_made(cases.matmul_table), charts=_made(performance.matmul_chart), intro=(
        "Cold = the first product (compile, library and thread-pool start included); warm = median of "
        "calibrated windows after warm-up. % of peak against the chip's dense peak (CPU: an estimate).")))
register(ReportSection(
    "Efficiency, energy and cost", "efficiency", tables=_made(costs.efficiency_table, costs.cost_energy_table),
    charts=_made(roofline.roofline_chart), bullets=lambda data: costs.cost_energy_unknown(data.frame), intro=(
        "Every result's achieved FLOP/s against what the chip can do (spec peak) and what this machine was "
        "measured to reach (ceilings), with its energy and what it costs at the given price.")))
register(ReportSection(
    "Speedup over the CPU", "speedup", tables=_made(cases.speedup_table), table_titles=False, intro=(
        "Each accelerator case over the same case on the CPU (same file when it has one). Matmul: FLOP/s "
        "ratios; training: cold = first-epoch time ratio, warm = steady samples/s ratio."),
    empty="No accelerator case with a matching CPU case in these files: no speedup to show."))
register(ReportSection(
    "Backend against backend", "frameworks", tables=frameworks.backend_pairs, terminal=False, intro=(
        "The same case on two backends on the same device (A: the backend that comes first in the files): "
        "the faster of the two and by how much (the ratio of median times), with the 95% bootstrap interval "
        "over the worker processes and their samples; significant when the interval excludes 1.")))
register(ReportSection(
    "Framework comparison", "layered", tables=_made(frameworks.layered_table), terminal=False, intro=(
        "Keras 3 (model.fit / predict_on_batch on its JAX or PyTorch backend) beside the same case in native "
        "JAX and PyTorch, same file, device, precision and batch. Ratio = native / Keras of the headline "
        "throughput (training: steady samples/s; inference: samples/s over the evaluation set; matmul: warm "
        "FLOP/s): above 1, native is faster. n/a: that framework has no such case in the file.")))
register(ReportSection(
    "Inference and precision", "inference", tables=_made(cases.inference_table),
    charts=_made(performance.inference_chart), table_titles=False, intro=(
        "Latency of one synchronised batch; throughput of a full pass over the evaluation set; quality "
        "of the converted model and its change against fp32 on the same samples.")))
register(ReportSection(
    "Generation", "generation", tables=_made(generation.generation_table),
    charts=_made(generation_charts.throughput_latency_chart), intro=(
        "Greedy decoding with a KV cache (docs/workloads.md, GPT; a Llama-family model is in the next section). "
        "TTFT = the prefill of the whole prompt batch until the first token exists on the device; decode "
        "tok/s = batch / the median round's mean decode step (the median of the processes'); end-to-end "
        "tok/s = new tokens / the whole generation, prefill included; per-token latency = one synchronised "
        "decode step. MFU (decode) = the decode FLOP rate (2N + 4·L·C·context per token) over the chip's "
        "peak: decoding is bound by memory, not FLOPs.")))
register(ReportSection(
    "Language models: prompt processing and generation", "llm", tables=lambda data: llm.format_tables(data.frame),
    charts=_made(generation_charts.tokens_batch_chart), intro=(
        "The llama-bench figures per weight format: pp = prompt tokens/s (the prefill of the whole prompt "
        "batch; TTFT), tg = generated tokens/s (batch / the median round's mean decode step), per-token latency of "
        "one synchronised decode step. Of bw bound = tg / (memory bandwidth / bytes one generated token "
        "reads: the weights once per step, the KV cache), the bandwidth measured by `xpubench ceilings` or "
        "by the run's brief measurement (its fastest window: a ceiling), else the device's spec; above 100% "
        "is printed n/a (the bound is unreliable: the bandwidth read low on a busy machine, or the bytes are "
        "undercounted). pp MFU = prefill FLOPs / TTFT over the chip's peak (docs/methodology.md).")))
register(ReportSection(   # the report's training table has tokens/s: this is the terminal's token view
    "Token models", "tokens", tables=_made(generation.token_training_table), report=False))
register(ReportSection(
    "Data-parallel scaling", "scaling", tables=_made(cases.scaling_table), charts=_made(performance.scaling_chart),
    table_titles=False))
register(ReportSection(
    "Misclassified test images", "gallery", terminal=False,
    charts=lambda data: training.gallery_charts(data.frame, data.items), intro=(
        "Image classifiers trained on real data: the test images the model got wrong, most confident "
        "mistakes first.")))
SPREAD = ("The raw samples behind each headline figure, at both levels: each case ran in several worker "
          "processes; the figure is the median of their medians, its 95% interval a bootstrap over processes "
          "then samples. ! marks a figure the harness flagged (CV >= 10%, fewer than 3 samples, a cut time "
          "budget, or processes that disagree).")
register(ReportSection(
    "Spread of every figure", "spread", terminal=False, intro=SPREAD, empty=SPREAD,
    tables=lambda data: [text_table("", spread.spread_table(data))]))
register(ReportSection(
    "Processes that disagreed", "disagreement", terminal=False,
    tables=lambda data: [text_table("", spread.disagreement_table(data))], intro=(
        "Cases whose worker processes disagreed far more than the samples inside each process: the "
        "machine's state changed between processes (another job, the hypervisor, thread placement). "
        "What the machine was doing around each process: load average, clock, steal time (on a VM).")))
register(ReportSection("Cases that did not finish ok", "failed", tables=_made(cases.status_table),
                       table_titles=False))
register(ReportSection(
    "Environments", "environments", terminal=False, intro=(
        "Where and with what each file was measured (with several, what they share once, then what differs)."),
    tables=lambda data: [text_table(title, frame) for title, frame in environment_tables(data.items)]))
