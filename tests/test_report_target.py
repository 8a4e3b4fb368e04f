"""Time to target in the outputs (report/tables/target.py, report/charts/target.py): the table, the summary's cells,
the answer's ranking with the interval of the ratio, the sweep sentences, compare's rows and the report's
section with its chart; on recorded seeds (no training)."""

from __future__ import annotations

from pathlib import Path

import pytest
import report_runs
from rich.console import Console
from test_time_to_target import seed_run

from xpubench.report.base.frame import Entry, ResultSet
from xpubench.report.compare import compare_loaded, render
from xpubench.report.render.build import build_report
from xpubench.report.render.terminal import print_run_output
from xpubench.report.tables.summary import summary_table
from xpubench.report.tables.target import curve_text, ranking_lines, sweep_lines, target_table
from xpubench.results.fold import aggregate

TORCH = [20.0, 21.0, 19.5, 20.4, 22.0]
JAX = [30.0, 31.5, 29.0, 30.2, 33.0]


def case_of(backend: str, times, *, precision="fp32", batch=256, **metrics):
    runs = [seed_run(i, t, backend=backend, **metrics) for i, t in enumerate(times)]
    for r in runs:
        r.case.update(precision=precision, batch_size=batch)
        r.case["key"] = r.case["run_id"] = f"mnist_cnn/{backend}/cpu/train/{precision}/b{batch}/real/to:x"
    return aggregate(runs)


def test_setups_are_ranked_by_time_to_target_with_the_interval_of_the_ratio():
    data = ResultSet.load([case_of("jax", JAX), case_of("torch", TORCH), case_of("keras", [None] * 5, best=0.961)])
    lines = ranking_lines(data)
    assert lines[0].startswith("mnist_cnn to accuracy>=0.975: fastest here torch cpu b256, 20.5 s (5/5 seeds")
    assert "1.49x sooner than jax cpu b256 (30.6 s; 95% interval 1." in lines[0]
    assert lines[1] == ("mnist_cnn to accuracy>=0.975: keras cpu b256 not reached: 5 of 5 seeds fell short in "
                        "n/a epochs (best 0.961)")
    table = target_table(data.frame).frame()
    assert list(table["time to target"]) == ["20.5 s", "30.6 s", "not reached"]
    assert list(table["reached"]) == ["5/5", "5/5", "0/5"]
    summary = summary_table(data.frame, data).frame()
    assert len(summary) == 1 and summary["workload"].iloc[0] == "mnist_cnn s to target"
    assert summary["jax"].iloc[0].startswith("30.6 ±") and summary["torch"].iloc[0].startswith("20.5 ±")
    assert summary["keras"].iloc[0] == "not reached"
    assert (summary["fastest"].iloc[0], summary["ratio"].iloc[0]) == ("torch", "1.49x")


def test_a_precision_sweep_says_samples_per_second_epochs_and_time_side_by_side():
    base = case_of("torch", JAX, epochs_to_target=5.0)
    bf16 = case_of("torch", TORCH, precision="bf16", samples_per_s=1800.0, epochs_to_target=6.0)
    lines = sweep_lines(ResultSet.load([base, bf16]))
    assert lines == [lines[0]] and lines[0].startswith(
        "mnist_cnn torch cpu, bf16 against fp32: 1.80x the samples/s, 1.20x the epochs to accuracy>=0.975, "
        "reaches it 1.49x sooner (95% interval")


def test_a_batch_sweep_records_the_learning_rate_it_ran_at():
    small = case_of("torch", JAX, batch=64, learning_rate=1e-3, lr_scaling="none: 0.001 at every batch size")
    large = case_of("torch", TORCH, batch=512, learning_rate=1e-3, lr_scaling="none: 0.001 at every batch size")
    (line,) = sweep_lines(ResultSet.load([small, large]))
    assert line.startswith("mnist_cnn torch cpu, batch 512 against 64:")
    assert line.endswith("learning rate 0.001 at both (none: 0.001 at every batch size)")


def test_the_terminal_prints_the_table_the_curves_and_the_answer(tmp_path):
    console = Console(width=200, record=True)
    results = [case_of("torch", TORCH), case_of("jax", JAX)]
    print_run_output(results, console, tmp_path / "r.jsonl")
    text = console.export_text()
    assert "Time to target" in text and "The metric against wall time" in text
    assert "fastest here torch cpu b256" in text and "samples/s" in text
    assert curve_text(results[0]) == "seed 3: 10 s 0.97 · 20 s 0.98 ✓"   # the median seed (20.4 s)
    verbose = Console(width=200, record=True)   # --verbose prints every terminal section: this one once
    print_run_output(results, verbose, tmp_path / "r.jsonl", verbose=True)
    assert verbose.export_text().count("The metric against wall time") == 1


def test_the_report_has_a_time_to_target_section_with_its_chart():
    report = build_report([case_of("torch", TORCH), case_of("jax", JAX)])
    section = next(s for s in report.sections if s.anchor == "target")
    assert section.charts[0].name == "time_to_target" and section.charts[0].png.startswith(b"\x89PNG")
    assert section.tables[0].frame.shape[0] == 2 and section.bullets


def test_compare_uses_the_time_to_target_of_each_side(monkeypatch):
    report_runs.quick_charts(monkeypatch)   # compare's rows and its chart's place: the chart is drawn for real above
    a = Entry("a", Path("a.jsonl"), case_of("torch", JAX))
    b = Entry("b", Path("b.jsonl"), case_of("torch", TORCH))
    (comparison,) = compare_loaded([a, b])
    (row,) = comparison.rows
    assert row.figure == "time_to_target" and row.significant and row.verdict == "1.49x sooner"
    assert [line.split(" to ")[0] for line in comparison.curves] == ["mnist_cnn torch cpu b256 [a]",
                                                                     "mnist_cnn torch cpu b256 [b]"]
    assert "data:image/png;base64," in render([comparison], "html") and "time to target" in render([comparison], "md")
    assert row.ratio == pytest.approx(20.466 / 30.566, rel=1e-3) and row.processes_a == 5
    same = compare_loaded([a, Entry("c", Path("c.jsonl"), case_of("torch", [None, 29.0, None, 30.0, 31.0]))])
    assert same[0].rows[0].verdict == "n/a: target not reached (B)"
