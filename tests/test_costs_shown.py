"""Issue 52 item 3: the costs a user pays, shown where the figure is. Compile time in the summary (with the
break-even where the fastest setup compiles longer), the LLM table, the report's advice and the site's
rows; the dollars a priced run costs per the summary row's unit. Read from the recorded runs in
tests/data/runs (their figures are what they are; every expected number is recomputed from the file)."""

from __future__ import annotations

import csv
import io
import math
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from xpubench.analysis import analyse
from xpubench.cli import main
from xpubench.plan.resolve import recorded_case
from xpubench.report.base.frame import ResultSet
from xpubench.report.base.table import print_table
from xpubench.report.render.terminal import print_summary
from xpubench.report.sentences import advice
from xpubench.report.sentences.advice import break_even
from xpubench.report.tables import llm
from xpubench.report.tables.summary import paid_tables
from xpubench.results import store
from xpubench.results.fold import aggregate_all

RUNS = Path(__file__).parent / "data" / "runs"
QUIET = "default-zen3-quiet.jsonl"   # matmul, mnist_cnn and llama pp64/tg16 on numpy, torch (eager) and jax
DECODE = Path(__file__).parent / "data" / "records" / "llama-decode-zen5.jsonl"   # torch eager and compiled, jax;
                                                                                 # priced at $0.10 per CPU-hour


def loaded(name: str | Path, price: float | None = None):
    runs = store.load_file(RUNS / name).runs
    for run in runs if price is not None else []:
        run.case["options"] = {**(run.case.get("options") or {}), "price_per_hour": price}
    return analyse(aggregate_all(runs, recorded_case))   # version 2 lines: the planner reads them (analysis.load)


def frame_row(frame, backend: str, workload: str):
    return frame[(frame["backend"] == backend) & (frame["workload"] == workload)].iloc[0]


def paid(results, title: str):
    """The table under the summary whose title starts so (report/tables/user_cost.py), None where none."""
    return next((t for t in paid_tables(ResultSet.load(results).frame) if t.title.startswith(title)), None)


def summary_text(results, width: int = 160) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    print_summary(results, console)
    return console.file.getvalue()


def test_under_the_summary_each_compile_is_shown_once_with_when_it_pays_back():
    results = loaded(QUIET)
    frame = ResultSet.load(results).frame
    table = paid(results, "Compile time per worker process")
    rows = {r["test"]: r for r in table.frame().to_dict("records")}
    assert set(rows) == {"b256", "tg16"}   # the llama case's on its tg row only; matmul records none apart
    jax, torch = frame_row(frame, "jax", "llama"), frame_row(frame, "torch", "llama")
    assert (rows["tg16"]["jax"], rows["tg16"]["torch (eager decode)"]) == (f"{jax['compile_s']:.3g} s", "none")
    mnist = frame_row(frame, "jax", "mnist_cnn")
    assert (rows["b256"]["jax"], rows["b256"]["torch"]) == (f"{mnist['compile_s']:.3g} s", "none")
    # the break-even from the figures the summary prints: extra compile / (time per token of torch - of jax)
    n = math.ceil(jax["compile_s"] / (1 / torch["decode_tokens_per_s"] - 1 / jax["decode_tokens_per_s"]))
    assert rows["tg16"]["pays back"] == f"jax after {n:,} tokens against torch (eager decode)"
    assert rows["b256"]["pays back"] == ""   # torch trains faster and compiles nothing: nothing to pay back
    said = summary_text(results)
    assert said.index("Summary on cpu") < said.index("Compile time per worker process") < said.index("FLOP/s ceil")


def test_the_llm_table_and_the_advice_show_the_compile_and_its_break_even():
    data = ResultSet.load(loaded("llama-brief-zen3.jsonl"))
    (table,) = llm.format_tables(data.frame)
    cells = table.frame()
    by = {(b.split()[0], t[:2]): c for b, t, c in zip(cells["backend"], cells["test"], cells["compile"])}
    jax = frame_row(data.frame, "jax", "llama")
    assert by[("jax", "tg")] == f"{jax['compile_s']:.3g} s" and by[("torch", "tg")] == "none"   # eager: none apart
    assert by[("jax", "pp")] == by[("torch", "pp")] == ""
    (line,) = [s for s in break_even(data) if s.startswith("llama")]
    torch = frame_row(data.frame, "torch", "llama")
    n = math.ceil(jax["compile_s"] / (1 / torch["decode_tokens_per_s"] - 1 / jax["decode_tokens_per_s"]))
    assert "faster per token than torch" in line and f"it wins only after {n:,} tokens" in line


def test_a_priced_run_shows_what_each_summary_row_costs_in_its_unit():
    results = loaded(QUIET, price=0.10)
    frame = ResultSet.load(results).frame
    table = paid(results, "Cost at")
    assert table.title.startswith("Cost at $0.10 per device-hour")
    rows = {r["test"]: r for r in table.frame().to_dict("records")}
    assert {t: rows[t]["per"] for t in rows} == {"N=2048": "PFLOP", "b256": "1M samples", "pp64": "1M prompt tokens",
                                                  "tg16": "1M generated tokens"}
    per_s = 0.10 / 3600
    jax_mm, torch_llama = (frame[(frame["backend"] == b) & (frame["workload"] == w)].iloc[0]
                           for b, w in (("jax", "matmul"), ("torch", "llama")))
    assert rows["N=2048"]["jax"] == f"${per_s * 1e15 / jax_mm['warm_flops_per_s']:,.4f}"
    assert rows["tg16"]["torch (eager decode)"] == f"${per_s * 1e6 / torch_llama['decode_tokens_per_s']:,.4f}"
    assert rows["pp64"]["torch (eager decode)"] == f"${per_s * 1e6 / torch_llama['prefill_tokens_per_s']:,.4f}"
    assert rows["b256"]["numpy"] == "-" and rows["tg16"]["cheapest"] == "jax"   # one price: the cheaper is faster
    said = summary_text(results)
    assert said.index("Summary on cpu") < said.index("Cost at $0.10") < said.index("FLOP/s ceilings")
    assert paid(loaded(QUIET), "Cost at") is None   # no price given: no cost table
    priced = llm.format_tables(frame)[0].frame()
    eager = "torch (eager decode)"
    assert set(priced["$ per 1M tok"]) == {rows["tg16"][eager], rows["tg16"]["jax"], rows["pp64"][eager],
                                            rows["pp64"]["jax"]}


def test_prices_that_differ_by_device_are_each_said():
    results = loaded(QUIET, price=0.10)
    for result in results:
        if result.case.backend == "jax":
            result.metrics["usd_per_hour"] = 0.25
    title = paid(results, "Cost at").title
    assert "the prices given (" in title and "jax $0.25/h" in title and "torch $0.10/h" in title


def test_the_site_rows_carry_the_compile_time(tmp_path, capsys):
    folder = tmp_path / "runs"
    folder.mkdir()
    shutil.copy(RUNS / "llama-brief-zen3.jsonl", folder)
    assert main(["site", str(folder), "-o", str(tmp_path / "site")]) == 0
    capsys.readouterr()
    jax = frame_row(ResultSet.load(loaded("llama-brief-zen3.jsonl")).frame, "jax", "llama")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "site" / "w" / "llama.csv").read_text())))
    assert {r["framework"]: r["compile"] for r in rows} == {"jax": str(jax["compile_s"]), "torch": ""}
    page = (tmp_path / "site" / "w" / "llama.html").read_text()
    assert re.search(r"<th[^>]*>compile</th>", page) and f">{jax['compile_s']:.3g} s<" in page


@pytest.mark.parametrize("width", [80, 120])
def test_the_tables_under_the_summary_fit_the_terminal(width):
    console = Console(file=io.StringIO(), width=width, color_system=None)
    tables = paid_tables(ResultSet.load(loaded(QUIET, price=2.5)).frame)
    for table in tables:
        print_table(table, console)
    assert len(tables) == 2 and max(len(line) for line in console.file.getvalue().splitlines()) <= width


def test_a_compiled_decode_pays_back_its_compile_against_the_eager_one(monkeypatch):
    results = loaded(DECODE)
    data = ResultSet.load(results)
    frame = data.frame
    torch = frame[frame["backend"] == "torch"]
    eager, compiled = (torch[torch["key"].str.endswith(v)].iloc[0] for v in ("/eager", "/compiled"))
    assert eager["compile_s"] != eager["compile_s"] and compiled["compile_s"] > 10   # NaN: nothing apart; torch.compile
    n = math.ceil(compiled["compile_s"] / (1 / eager["decode_tokens_per_s"] - 1 / compiled["decode_tokens_per_s"]))

    def ours(s):
        return "than torch (eager decode)" in s and s.split(": ")[1].startswith("torch cpu")
    # two decode rounds per process were recorded: the speed-up is not significant, so no break-even is claimed
    assert not [s for s in break_even(data) if ours(s)]
    real = advice.speedup
    monkeypatch.setattr(advice, "speedup", lambda *a: replace(real(*a), significant=True))   # as if it were
    (line,) = [s for s in break_even(data) if ours(s)]
    assert f"needs {compiled['compile_s']:.3g} s more to start (compile); it wins only after {n:,} tokens." in line
    # priced when it ran: its cost table needs no price added, and the LLM table names each decode step
    assert paid(results, "Cost at $0.10 per device-hour") is not None
    (table,) = llm.format_tables(frame)
    cells = table.frame()
    steps = dict(zip(cells["backend"], cells["compile"]))   # the tg row's (the pp row's is "")
    assert steps == {"torch (eager decode)": "none", "torch": f"{compiled['compile_s']:.3g} s",
                     "jax": f"{frame_row(frame, 'jax', 'llama')['compile_s']:.3g} s"}
