"""Issue 32, item 5: what a newcomer trips on in `xpubench report`, read from recorded results files of the
project's 2-core VM (tests/data/runs/): the default file name follows the format, every id on the page is
unique, a value every row shares is said once above its table, one unit per workload, the faster backend
named first, llama rows in one section only and in the advice, the generation chart drawn only for a sweep
and with tick labels, the roofline's labels apart and every case it cannot place named with its reason."""

from __future__ import annotations

import functools
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from report_runs import quick_charts

from xpubench import analysis
from xpubench.cli import main
from xpubench.report.base.frame import ResultSet
from xpubench.report.charts.generation import throughput_latency_figure
from xpubench.report.charts.labels import label_boxes, place_point_labels
from xpubench.report.charts.performance import throughput_figure
from xpubench.report.charts.roofline import not_placed, roofline_chart
from xpubench.report.render import html, markdown
from xpubench.report.render.build import build_report, default_output, same_in_every_row
from xpubench.report.sections import section
from xpubench.report.tables.cases import training_table
from xpubench.report.tables.costs import efficiency_table
from xpubench.report.tables.environment import environment_tables
from xpubench.report.tables.frameworks import backend_pairs, faster_text
from xpubench.report.tables.generation import generation_table
from xpubench.report.tables.llm import format_tables

RUNS = Path(__file__).parent / "data" / "runs"
DEFAULT = RUNS / "default-zen4.jsonl"     # the default run: CNN training and matmul, torch only trained
RICH = RUNS / "report-zen3.jsonl"         # gpt and llama generation, gpt training, matmul with ceilings


@functools.cache
def report_of(*paths: Path):
    """The report of recorded files, built once per session (the tests read it, never change it): its tables,
    ids and texts; its charts are made but saved as tiny PNGs (report_runs.quick_charts), their pixels
    are the chart tests' below."""
    with pytest.MonkeyPatch.context() as patch:
        quick_charts(patch)
        return build_report(analysis.load([str(p) for p in paths]))


@functools.cache
def data_of(*paths: Path) -> ResultSet:
    return ResultSet.load(analysis.load([str(p) for p in paths]))


class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.ids += [value for name, value in attrs if name == "id"]


@pytest.mark.slow
def test_every_id_on_the_page_is_unique():
    """A section's anchor and its chart's figure were both id="matmul" (and "generation")."""
    parser = _Ids()
    parser.feed(html.render(report_of(DEFAULT, RICH)))
    twice = [i for i, n in Counter(parser.ids).items() if n > 1]
    assert parser.ids and not twice, twice
    assert {"matmul", "generation", "chart-matmul", "chart-generation"} <= set(parser.ids)


@pytest.mark.slow
def test_the_default_file_name_follows_the_format(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    quick_charts(monkeypatch)   # where the report goes is asserted, not its charts' pixels
    assert main(["report", str(DEFAULT), "--format", "md"]) == 0
    assert not (tmp_path / "xpubench-report.html").exists()
    assert (tmp_path / "xpubench-report.md").read_text().lstrip().startswith("<!-- generator")
    assert "# xpubench report" in (tmp_path / "xpubench-report.md").read_text()
    assert default_output(None) == default_output("html") == "xpubench-report.html"


@pytest.mark.slow   # DEFAULT ~3.5 s, RICH ~3 s: whole reports drawn
@pytest.mark.parametrize("path", [DEFAULT, RICH])
def test_no_table_of_many_rows_repeats_one_value_in_every_row(path):
    for sec in report_of(path).sections:
        for block in sec.tables:
            assert "chip" not in block.frame.columns, (sec.title, block.title)
            if len(block.frame) > 1:
                assert not same_in_every_row(block.frame), (sec.title, block.title, list(block.frame.columns))


@pytest.mark.slow
def test_a_value_every_row_shares_is_said_once_above_the_table(tmp_path):
    report = report_of(DEFAULT)
    blocks = [b for s in report.sections for b in s.tables]
    chips = [b for b in blocks if "chip = AMD EPYC" in b.lead]
    assert len(chips) >= 2                       # the training and the matmul tables said it on every row
    matmul = next(b for s in report.sections if s.anchor == "matmul" for b in s.tables)
    assert {"backend", "N", "warm"} <= set(matmul.frame.columns)     # what differs stays
    page = markdown.render(report, tmp_path / "r.md")
    assert "Every row: backend = torch, device = cpu, chip = AMD EPYC, dtype = fp32" in page


def test_a_one_row_table_keeps_every_column():
    import pandas as pd

    assert same_in_every_row(pd.DataFrame({"a": ["1"], "b": ["2"]})) == {}
    two = pd.DataFrame({"a": ["x", "x"], "b": ["1", "2"]})
    assert same_in_every_row(two) == {"a": "x"}
    assert len(same_in_every_row(pd.DataFrame({"a": ["x", "x"], "b": ["y", "y"]}))) == 1   # one column kept


def test_cost_and_energy_repeats_no_throughput():
    sec = section("efficiency")
    data = data_of(DEFAULT)
    for table in sec.shown_tables(data, report=True):
        assert not {"samples/s", "tokens/s", "throughput"} & set(table.frame().columns), table.title
    assert any("no price given" in b for b in sec.bullets(data))


def test_the_faster_backend_is_named_first_with_a_ratio_above_one():
    (table,) = backend_pairs(data_of(DEFAULT))
    cells = table.frame()
    assert "B speed / A [95% CI]" not in cells and "speed" in cells
    for text in cells["speed"]:
        found = re.fullmatch(r"(\w+) is (\d+\.\d\d)x faster than (\w+) \[95% CI (\d+\.\d\d)-(\d+\.\d\d)x\]", text)
        assert found, text
        assert float(found[2]) >= 1.0 and float(found[4]) <= float(found[5])


def test_faster_text_inverts_a_ratio_below_one():
    class Est:
        ratio, low, high = 0.4, 0.25, 0.5      # b's speed over a's: a is 2.5x faster

    assert faster_text(Est, "torch", "jax") == "torch is 2.50x faster than jax [95% CI 2.00-4.00x]"
    assert faster_text(None, "torch", "jax") == "n/a"


def test_one_unit_per_workload_in_tables_and_the_chart():
    frame = data_of(RICH).frame
    cells = training_table(frame).frame()
    gpt, others = cells[cells["workload"] == "gpt"], cells[cells["workload"] != "gpt"]
    assert not gpt.empty and not others.empty and "tokens/s" not in cells
    assert gpt["throughput"].str.contains("tok/s").all()
    assert others["throughput"].str.contains("samples/s").all()
    _, ax, caption = throughput_figure(frame)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert "gpt (tok/s)" in labels and "tokens/s" in ax.get_ylabel() and "gpt: tokens/s" in caption
    advice = " ".join(section("advice").bullets(data_of(RICH)))
    assert re.search(r"gpt training: [^.]* tok/s", advice)


def test_llama_rows_are_shown_in_one_section_and_in_the_advice():
    data = data_of(RICH)
    generation = generation_table(data.frame).frame()
    llm = [t.frame() for t in format_tables(data.frame)]
    assert not generation.empty and set(generation["workload"]) == {"gpt"}
    assert llm and all(not t.empty for t in llm)
    advice = section("advice").bullets(data)
    assert any(b.startswith("smollm-135m 4/30 layers, pp64/tg16: ") and "of the bandwidth bound" in b
               and b.endswith(".") for b in advice)


def test_the_generation_chart_needs_a_sweep_and_labels_its_ticks():
    data = data_of(RICH)
    made = throughput_latency_figure(data.frame)
    assert made is not None
    fig, ax, single = made
    assert single == ["gpt jax cpu"]          # one batch size: in the table, not drawn as a line of one point
    FigureCanvasAgg(fig).draw()
    assert [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    frame = data.frame
    one_batch = frame[~((frame["mode"] == "generate") & (frame["batch_size"] == 4))]
    assert throughput_latency_figure(one_batch) is None     # one point per line: the table holds it


def test_the_roofline_names_every_case_it_cannot_place_with_the_reason():
    frame = data_of(DEFAULT).frame
    chart = roofline_chart(frame)
    assert "Not placed" in chart.caption
    for workload in ("mnist_cnn", "fashion_cnn", "imdb_lstm"):
        assert f"{workload} train (torch)" in chart.caption
    edited = frame.assign(bytes_unknown=["PyTorch has no count"] * len(frame))
    reasons = not_placed(edited, edited.index[edited["mode"] == "matmul"])
    assert list(reasons) == ["PyTorch has no count"] and len(reasons["PyTorch has no count"]) == 3
    rich = data_of(RICH).frame
    assert any("PyTorch has no count" in why for why in not_placed(rich, []))


def test_point_labels_never_overlap_and_a_repeated_label_is_said_once():
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    points = [(1.0, 1.0 + i * 0.01, "N=1024") for i in range(3)] + [(1.0 + i * 0.02, 1.0, f"case {i}")
                                                                   for i in range(6)]
    ax.scatter([p[0] for p in points], [p[1] for p in points])
    ax.set_xlim(0.5, 1.5), ax.set_ylim(0.5, 1.5)
    place_point_labels(fig, ax, points)
    texts = [t for t in ax.texts if t.get_text()]
    assert [t.get_text() for t in texts].count("N=1024") == 1
    boxes = label_boxes(fig, texts)
    assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]


def test_cases_of_two_prompt_lengths_are_not_paired_as_one_case():
    """gpt generation on jax at a 64-token prompt and on torch at a 32-token one are different cases."""
    (table,) = backend_pairs(data_of(RICH))
    assert not table.frame()["case"].str.startswith("generate").any()


def test_the_cpu_peak_basis_of_several_runs_is_said_once_with_the_clocks_range():
    note = efficiency_table(data_of(RICH).frame).note
    assert note.count("CPU peak") == 1 and note.count("32 FLOP/cycle") == 1
    assert re.search(r"2 cores x \d\.\d\d-\d\.\d\d GHz x 32 FLOP/cycle", note)


def test_facts_every_file_shares_are_written_once():
    (_, shared), (_, differs) = environment_tables(data_of(RICH).items)
    shared, differs = shared.set_index(""), differs.set_index("")
    assert shared.loc["torch", "value"] == "2.13.0+cpu" and "torch" not in differs.index
    assert "xpubench" in differs.index and "xpubench" not in shared.index and len(differs.columns) > 1
    assert all(re.fullmatch(r"0\.1\.0 \(git [0-9a-f]{12}(\+dirty)?\)", v) for v in differs.loc["xpubench"])
    (_, one), = environment_tables(data_of(DEFAULT).items)      # one file: its table as it is
    assert list(one.columns) == ["", "default-zen4"]


class _Compiled:
    def __init__(self, costs):
        self.costs = costs

    def cost_analysis(self):
        if isinstance(self.costs, Exception):
            raise self.costs
        return self.costs


@pytest.mark.parametrize("costs, known, why", [
    ({"bytes accessed": 4096.0, "flops": 64.0}, 1024.0, None),
    ({"bytes accessed": 4096.0, "flops": 8.0}, None, "loop's (scan's) body once"),   # under half of 4 x 8 FLOPs
    ({"flops": 64.0}, None, "counts no bytes"),
    (NotImplementedError("no cost analysis"), None, "no cost analysis on this platform")])
def test_jax_says_why_a_steps_bytes_are_unknown(costs, known, why):
    from xpubench.backends.jax_.cost import step_bytes_per_sample, step_bytes_unknown

    compiled = _Compiled(costs)
    assert step_bytes_per_sample(compiled, 4, 8.0) == known
    reason = step_bytes_unknown(compiled, 4, 8.0)
    assert (reason is None) if why is None else (why in reason)
