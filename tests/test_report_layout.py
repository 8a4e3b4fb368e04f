"""The report reads at a glance: chart labels that don't overlap, a training table that fits a laptop
page, curves of synthetic data labelled as such, and `xpubench run` output that fits the terminal."""

import dataclasses
import io

import pytest
from rich.console import Console
from test_report_frame import FINGERPRINT, record

from xpubench.report.base.frame import results_frame
from xpubench.report.charts import performance as charts
from xpubench.report.charts.labels import overlapping

LONG_WORKLOADS = ("cifar10_resnet18", "fashion_mnist_mlp", "imdb_lstm", "mnist_cnn", "tiny_transformer_lm",
                  "wikitext_gpt_small")


def many_workloads(backends=("torch", "jax"), devices=("cpu", "gpu:0")):
    return [record(workload=w, backend=b, device=d, step=0.01 * (i + 1), seed=i)
            for i, w in enumerate(LONG_WORKLOADS) for b in backends for d in devices]


@pytest.mark.parametrize("backends,devices", [(("torch",), ("cpu",)), (("torch", "jax"), ("cpu", "gpu:0"))])
def test_throughput_chart_workload_labels_do_not_overlap(backends, devices):
    fig, ax = charts.throughput_figure(results_frame(many_workloads(backends, devices)))[:2]
    labels = ax.get_xticklabels()
    assert [t.get_text() for t in labels] == sorted(LONG_WORKLOADS)
    assert overlapping(fig, labels) == []


def test_overlap_check_catches_crowded_labels():
    """The check itself: six long labels crammed into a narrow figure do overlap."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2))
    ax = fig.add_subplot()
    ax.set_xticks(range(6), LONG_WORKLOADS)
    assert overlapping(fig, ax.get_xticklabels())


LONG_CHIP = "AMD EPYC 7B13 64-Core Processor with a long marketing name"


def training_results():
    """Training cases of two workloads, two backends, two devices, three batch sizes, every metric the
    training table shows, on a chip with a long name."""
    cpu = {**FINGERPRINT["backends"]["torch"]["devices"][0], "name": LONG_CHIP}
    fp = {**FINGERPRINT, "backends": {b: {"installed": True, "devices": [cpu, FINGERPRINT["backends"][b]["devices"][1]]}
                                      for b in ("torch", "jax")}}
    out = []
    for i, (w, b, d, batch) in enumerate((w, b, d, batch) for w in ("cifar10_resnet18", "mnist_cnn")
                                         for b in ("torch", "jax") for d in ("cpu", "gpu:0")
                                         for batch in (32, 256, 4096)):
        r = record(workload=w, backend=b, device=d, batch=batch, step=0.0123 * (i + 1), seed=i, compile_s=12.345,
                   first_epoch_s=123.4, epoch_s=98.76, step_iqr_s=0.00123, us_per_sample=1234.0,
                   achieved_flops_per_s=1.234e13, mfu=0.1234, peak_is_estimate=True, peak_memory_bytes=12.3e9)
        out.append(dataclasses.replace(r, fingerprint=fp))
    return out


def chromium():
    import shutil

    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def overflowing_tables(page: str, tmp_path, width: int, then: int) -> tuple[list[str], list[str]]:
    """Render the page in headless Chromium at ``width`` px, then with the page itself ``then`` px wide (no rule
    of the page reads the window's width), in one browser start (~1.5 CPU s each); the title of every table
    wider than its box (a horizontal scroll bar) at each width. The measuring script goes into a copy of the
    page only."""
    import subprocess

    probe = ("<script>const wide = () => [...document.querySelectorAll('.scroll')]"
             ".filter(d => d.scrollWidth > d.clientWidth + 1)"
             ".map(d => (d.previousElementSibling || {}).textContent || '?');"
             f"const first = wide(); document.documentElement.style.width = '{then}px';"
             "document.title = JSON.stringify([first, wide()])</script>")
    path = tmp_path / "probe.html"
    path.write_text(page.replace("</body>", probe + "</body>"), encoding="utf-8")
    proc = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                           f"--window-size={width},900", path.as_uri()],
                          capture_output=True, text=True, timeout=120, check=False)
    import json
    import re

    title = re.search(r"<title>(.*?)</title>", proc.stdout, re.DOTALL)
    assert title, proc.stderr[-2000:]
    first, narrow = json.loads(title.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    return first, narrow


@pytest.mark.slow
@pytest.mark.skipif(chromium() is None, reason="chromium is not installed")
def test_training_tables_fit_a_laptop_page(tmp_path, monkeypatch):
    from report_runs import quick_charts

    from xpubench.report.render import html
    from xpubench.report.render.build import build_report

    quick_charts(monkeypatch)   # the tables' widths are measured; a chart's image is at most the page's width
    report = build_report(training_results())
    training = next(s for s in report.sections if s.anchor == "training")
    titles = [t.title for t in training.tables]
    assert "Every training case: time" in titles  # split: a page cannot hold every column at once
    wide, narrow = overflowing_tables(html.render(report), tmp_path, 1366, then=500)
    assert not [t for t in wide if t.startswith("Every training case")], wide
    assert narrow, "the probe finds a table that overflows"


@pytest.mark.slow
def test_curves_of_synthetic_data_are_labelled_and_folded_real_ones_stay_prominent(monkeypatch):
    from report_runs import quick_charts

    from xpubench.report.render import html
    from xpubench.report.render.build import build_report

    quick_charts(monkeypatch)   # which charts are made, their titles and where they go are asserted, not pixels
    synthetic = record(workload="mnist_cnn", backend="torch")
    on_real = record(workload="mnist_cnn", backend="jax", seed=3)
    real = dataclasses.replace(on_real, case=dataclasses.replace(on_real.case, data="real"))
    report = build_report([synthetic, real])
    training = next(s for s in report.sections if s.anchor == "training")
    curves = {c.name: c for c in training.charts if c.name.startswith("curves")}
    assert set(curves) == {"curves", "curves_synthetic"}
    assert not curves["curves"].folded and "synthetic" not in curves["curves"].title
    assert curves["curves_synthetic"].folded and "means nothing" in curves["curves_synthetic"].title
    page = html.render(report)
    folded = page[page.index("<details>"):page.index("</details>")]
    assert 'id="chart-curves_synthetic"' in folded and 'id="chart-curves"' not in folded
    only_synthetic = build_report([synthetic])
    names = [c.name for s in only_synthetic.sections for c in s.charts]
    assert "curves_synthetic" in names and "curves" not in names


def run_output(results, *, width: int, terminal: bool, verbose: bool) -> str:
    from xpubench.report.render.terminal import print_run_output

    console = Console(file=io.StringIO(), width=width, force_terminal=terminal, color_system=None)
    print_run_output(results, console, "results/run.jsonl", verbose=verbose)
    return console.file.getvalue()


@pytest.mark.parametrize("terminal", [True, False])
@pytest.mark.parametrize("verbose", [False, True])
def test_run_output_fits_100_columns_and_cuts_nothing(terminal, verbose):
    results = many_workloads() + training_results() + [record(workload="imdb_lstm", status="oom", batch=4096)]
    text = run_output(results, width=100, terminal=terminal, verbose=verbose)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert "…" not in text                         # no cell cut short ("cifar10_r…")
    summary = text.split("\n± half")[0]
    for name in LONG_WORKLOADS:                    # every name whole, once: its rows are grouped under it
        assert summary.count(name) == 1, name
    group = summary[summary.index("cifar10_resnet18"):summary.index("fashion_mnist_mlp")]
    assert "samples/s" in group and group.index("b32") < group.index("b256") < group.index("b4096")
    assert ("┃" in text) == (terminal and verbose)  # a pipe gets plain text, no box drawing (the summary: none)
    assert "Answer:" in text and ("Every training case" in text) == verbose


def test_summary_is_one_row_per_workload_test_and_dtype_with_a_column_per_backend_and_device():
    from xpubench.report.tables.summary import summary_table

    frame = results_frame(many_workloads())
    table = summary_table(frame)
    assert [c.name for c in table.columns] == ["workload", "test", "dtype", "torch cpu", "torch gpu:0", "jax cpu",
                                               "jax gpu:0", "fastest", "ratio"]
    assert len(table.rows) == len(LONG_WORKLOADS)
    narrow = run_output(many_workloads(), width=60, terminal=False, verbose=False)
    assert max(len(line) for line in narrow.splitlines()) <= 60 and "…" not in narrow


def test_the_fastest_is_taken_within_a_precision():
    """A bf16 case is never the yardstick of an fp32 one (issue 21): each precision is its own row."""
    from xpubench.report.base.frame import ResultSet
    from xpubench.report.tables.summary import summary_table

    results = [record(backend="torch", precision="fp32", step=0.2), record(backend="jax", precision="fp32", step=0.1),
               record(backend="torch", precision="bf16", step=0.05)]
    data = ResultSet.load(results)
    cells = summary_table(data.frame, data).frame().set_index("dtype")
    assert (cells.loc["fp32", "fastest"], cells.loc["fp32", "ratio"]) == ("jax", "2.00x")
    assert (cells.loc["bf16", "fastest"], cells.loc["bf16", "ratio"], cells.loc["bf16", "jax"]) == ("torch", "", "-")


@pytest.mark.slow
def test_real_run_prints_within_100_columns(tmp_path, monkeypatch, capsys, detected_once):
    """A real run (its worker a process) printed as `xpubench run` prints it on a 100-column terminal, in this
    process (the CLI's console reads COLUMNS as a new process would)."""
    from xpubench.cli import main

    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.chdir(tmp_path)
    code = main(["run", "-w", "matmul", "-b", "numpy", "--size", "64", "--time-budget", "0.2", "--processes", "1",
                 "-o", "mm.jsonl"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert "fastest" in out and "matmul: fastest here numpy cpu" in out
    hint = next(i for i, line in enumerate(lines) if "xpubench report mm.jsonl -o report.html" in line)
    assert " ".join(lines[hint + 1:]).startswith("time: estimated"), lines[hint:]   # only the estimate after it


@pytest.mark.parametrize("width", [80, 100])
def test_list_fits_the_terminal_and_never_cuts_a_name(width):
    """`xpubench list` at 80 and 100 columns: no line wider, no "…", every workload name whole (it is what
    a user types after -w)."""
    from xpubench.cli.listing import print_listing
    from xpubench.workloads import default_run

    console = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    print_listing(console)
    text = console.file.getvalue()
    assert max(len(line) for line in text.splitlines()) <= width
    assert "…" not in text
    for name in default_run():
        assert f"│ {name} " in text, name
