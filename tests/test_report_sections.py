"""Issue 23 items 5 and 6: one record per mode (results/modes.py) and one ordered list of report sections
(report/sections.py). A mode or a section registered in one place shows in the terminal and in the
report without a line of report/render/build.py or report/render/terminal.py changing; backends are paired by name."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from rich.console import Console

from xpubench.case import Case
from xpubench.report import sections
from xpubench.report.base.frame import Entry, ResultSet, ok_rows
from xpubench.report.base.table import Column, Table
from xpubench.report.compare import compare_loaded
from xpubench.report.render import html
from xpubench.report.render.build import build_report
from xpubench.report.render.terminal import headline, print_run_output, print_run_tables
from xpubench.report.sections import SECTIONS, ReportSection, register
from xpubench.results import metrics, modes
from xpubench.results.metric_base import figure
from xpubench.results.metrics_common import Common
from xpubench.results.modes import MODES, Figure, Mode
from xpubench.results.schema import Result


@dataclass
class EmbedMetrics(Common):
    """A mode no xpubench has: embedding a batch of texts."""

    GROUP: ClassVar[str] = "embed"
    embed_s: float | None = figure("s", "median call embedding one batch")
    embed_ci95_low_s: float | None = figure("s", "95% interval of embed_s, low end")
    embed_ci95_high_s: float | None = figure("s", "95% interval of embed_s, high end")
    vectors_per_s: float | None = figure("1/s", "vectors embedded per second")


EMBED = Mode("embed", EmbedMetrics, "embedding", samples=("embed_s",),
             headline=(Figure("vectors_per_s", after="vec/s"),), details=(Figure("embed_s", after="/batch"),))


@pytest.fixture
def restored():
    """The mode and section registries (and the metrics the new mode declares) as they were, after the test."""
    saved_modes, saved_metrics, saved_sections = dict(MODES), dict(metrics.REGISTRY), list(SECTIONS)
    yield
    MODES.clear()
    MODES.update(saved_modes)
    metrics.REGISTRY.clear()
    metrics.REGISTRY.update(saved_metrics)
    SECTIONS[:] = saved_sections


def embedded(backend: str, seconds: float, seed: int = 0) -> Result:
    rng = np.random.default_rng(seed)
    samples = [float(v) for v in seconds * (1 + 0.01 * rng.standard_normal(8))]
    case = Case("mnist_cnn", backend, "cpu", "embed", batch_size=64).as_dict()
    found = {"embed_s": seconds, "embed_ci95_low_s": seconds * 0.99, "embed_ci95_high_s": seconds * 1.01,
             "vectors_per_s": 64 / seconds, "warning": None}
    return Result(case=case, status="ok", metrics=metrics.check(found), samples={"embed_s": samples})


def terminal_text(results, *, verbose: bool = True) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    print_run_output(results, console, "run.jsonl", verbose=verbose)
    return console.file.getvalue()


def test_a_mode_registered_once_is_folded_ranked_printed_reported_and_compared(restored):
    with pytest.raises(ValueError, match="undeclared"):
        metrics.check({"vectors_per_s": 1.0})            # before it is registered nobody declared its figures
    modes.register(EMBED)
    results = [embedded("torch", 0.02), embedded("jax", 0.04, seed=1)]
    assert headline(results[0]) == "3,200 vec/s, 20.00 ms/batch"          # the progress line
    text = terminal_text(results)
    summary = text.split("Answer:")[0]                                   # summary: unit, figures, the fastest
    assert "mnist_cnn vec/s" in summary and re.search(r"embed b64\s+fp32\s+3,200 ±1%\s+1,600 ±1%\s+torch\s+2\.00x",
                                                      summary), summary
    assert "mnist_cnn: fastest here torch cpu at batch 64" in text             # the answer
    report = build_report(results)
    block = next(s for s in report.sections if s.anchor == "spread").tables[0]
    spread = block.frame   # the timing is the same in both rows: said once above the table
    assert "timing = embed_s" in block.lead and "n/a" not in set(spread["95% CI"])
    [pair] = next(s for s in report.sections if s.anchor == "frameworks").tables
    row = pair.frame.iloc[0]
    assert (row["A"], row["B"], row["case"]) == ("torch", "jax", "embed fp32 batch 64")
    assert row["speed"].startswith("torch is 2.00x faster than jax") and row["verdict"] == "significant"
    entries = [Entry("a", Path("a.jsonl"), r) for r in results] + [Entry("b", Path("b.jsonl"),
                                                                         embedded("torch", 0.03, seed=2))]
    [comparison] = compare_loaded(entries)
    assert comparison.rows[0].figure == "embed_s" and comparison.rows[0].ratio == pytest.approx(1.5, rel=0.05)


def test_a_mode_naming_a_figure_its_dataclass_does_not_declare_is_refused():
    with pytest.raises(TypeError, match="vector_per_s"):
        Mode("embed", EmbedMetrics, "embedding", samples=("embed_s",), headline=(Figure("vector_per_s"),))
    with pytest.raises(TypeError, match="embed_time_s"):
        Mode("embed", EmbedMetrics, "embedding", samples=("embed_time_s",), headline=(Figure("vectors_per_s"),))


def keys_table(frame) -> Table:
    return Table("Every case by its key", [Column("case", lambda r: str(r["key"]), text=True)], ok_rows(frame))


@pytest.mark.slow   # ~1 s each: a whole report built (its charts made, saved as tiny PNGs: what is asserted is where
                    # the section goes)
@pytest.mark.parametrize("terminal, report", [(True, True), (True, False), (False, True)])
def test_a_section_registered_once_shows_where_its_flags_say(restored, terminal, report, monkeypatch):
    from report_runs import quick_charts
    from test_report_frame import record

    quick_charts(monkeypatch)

    results = [record(backend="torch"), record(backend="jax", seed=1)]
    register(ReportSection("Case keys", "keys", tables=lambda data: [keys_table(data.frame)], terminal=terminal,
                           report=report, intro="Every case's key."), before="failed")
    console = Console(file=io.StringIO(), width=200, color_system=None)
    print_run_tables(results, console)
    printed = console.file.getvalue()
    built = build_report(results)
    anchors = [s.anchor for s in built.sections]
    assert ("Every case by its key" in printed) == terminal
    assert ("keys" in anchors) == report
    if report:
        assert anchors.index("spread") < anchors.index("keys") < anchors.index("environments")   # where it went
        page = html.render(built)
        assert 'id="keys"' in page and "Every case by its key" in page and results[0].key in page
    if terminal:
        assert results[0].key in printed


def test_backends_are_paired_by_name_whatever_they_are():
    """Every two backends that ran the same case, whatever their names: nothing in the code names one."""
    from test_report_frame import record

    results = [record(backend=b, step=s, seed=i) for i, (b, s) in enumerate((("numpy", 0.3), ("mlx", 0.1),
                                                                            ("torch", 0.2)))]
    [table] = sections.section("frameworks").tables(ResultSet.load(results))
    shown = table.frame()
    assert [(r["A"], r["B"]) for _, r in shown.iterrows()] == [("numpy", "mlx"), ("numpy", "torch"), ("mlx", "torch")]
    assert [re.sub(r"\d+\.\d+x", "Nx", s.split(" [")[0]) for s in shown["speed"]] == [
        "mlx is Nx faster than numpy", "torch is Nx faster than numpy", "mlx is Nx faster than torch"]


def test_every_table_of_a_notebook_comes_from_the_one_list():
    from test_report_frame import record

    results = [record(backend="torch"), record(backend="jax", seed=1), record(mode="infer", seed=2)]
    tables = sections.tables_of(results)
    assert {"Every training case", "Inference", "Backend against backend", "Spread of every figure"} <= set(tables)
    assert all(not frame.empty for frame in tables.values())


def test_each_mode_declares_its_own_figures():
    """The built-in records: every name they give is a figure of their dataclass or a shared group."""
    for mode in MODES.values():
        assert mode.metrics.GROUP == mode.name
        declared = set(mode.metrics.names())
        assert set(mode.samples) <= declared and mode.flop_rate in declared | {None}
        assert all(f.metric in declared for f in mode.headline)
    assert [m.name for m in MODES.values() if m.ranked] == ["matmul", "train", "infer"]
    assert [m.cost.metric for m in MODES.values() if m.cost] == ["usd_per_1m_samples", "usd_per_1m_predictions"]
    typed = MODES["train"].typed({"step_s": 0.1, "samples_per_s": 320.0, "mfu": 0.4})
    assert typed.step_s == 0.1 and typed.samples_per_s == 320.0 and not hasattr(typed, "mfu")


def test_entries_of_a_new_mode_fold_by_its_samples(restored):
    from xpubench.results.fold import headline_name

    modes.register(EMBED)
    result = embedded("torch", 0.02)
    assert headline_name(result) == "embed_s"
    entry = Entry("a", Path("a.jsonl"), result)
    assert ResultSet.load([entry]).frame.iloc[0]["timing"] == "embed_s"


RECORDED = sorted(p for p in (Path(__file__).parent / "data").rglob("*.jsonl")
                  if "llamacpp" not in p.parts)   # tests/data/llamacpp: llama-bench's own output, not a results file


@pytest.mark.slow   # charts and bootstraps of every recorded file: ~20 s on the 2-core VM
@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_every_recorded_file_loads_reports_and_compares(path, tmp_path):
    """Files written before the mode records and the section list: the report (HTML and Markdown), the
    terminal's tables and a comparison with itself still come out of each."""
    from xpubench import analysis
    from xpubench.report.compare import compare_files
    from xpubench.report.render import markdown

    loaded = analysis.load([path])
    report = build_report(loaded)
    assert {"advice", "spread", "environments"} <= {s.anchor for s in report.sections}
    assert "<h2>" in html.render(report) and "# xpubench report" in markdown.render(report, tmp_path / "r.md")
    text = terminal_text([r for f in loaded for r in f.results])
    assert ("Summary" in text or "a row per runtime and format" in text) and "Answer:" in text
    [same] = compare_files(path, path)
    ok = [r for r in same.rows if r.ratio is not None]
    assert ok and all(r.ratio == pytest.approx(1.0) and not r.significant for r in ok)
