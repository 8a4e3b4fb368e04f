"""The first table a newcomer reads (issue 32): the summary shaped like llama-bench's (one row per workload x
test x dtype, a column per backend, the fastest and its ratio, every mark defined), llama's pp and tg rows
with the share of the bandwidth bound, the progress line's labelled statistics, the brief default plan
(few cases, 2+ processes each, the accelerator first) and the brief bandwidth a run measures itself.
Results are built by hand; nothing runs a model."""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from test_llama_report import result as llama_result
from test_report_frame import record

from xpubench.analysis import analyse
from xpubench.report.base.frame import ResultSet
from xpubench.report.render.terminal import generation_line, print_run_output
from xpubench.report.tables.llm import runtime_table
from xpubench.report.tables.summary import NOISY, NOT_RUN, UNSURE, summary_table
from xpubench.results.schema import Result

DATA = Path(__file__).parent / "data"


def matmul(backend: str, precision: str, gflops: float, seed: int = 0) -> Result:
    r = record(workload="matmul", backend=backend, mode="matmul", precision=precision, seed=seed)
    case = dataclasses.replace(r.case, size=2048, batch_size=None)   # matmul/<backend>/cpu/matmul/<precision>/n2048
    t = 2 * 2048 ** 3 / (gflops * 1e9)
    samples = [t * (1 + 0.01 * ((i * 7 + seed) % 5 - 2)) for i in range(7)]
    return dataclasses.replace(r, case=case, metrics={"warm_s": t, "warm_flops_per_s": gflops * 1e9, "warning": None,
                                                         "warm_ci95_low_s": min(samples),
                                                         "warm_ci95_high_s": max(samples)},
                               samples={"warm_s": samples})


def mixed_run() -> list[Result]:
    """Interleaved as a run writes them: matmul in three places, training, llama's generation."""
    mnist = [record(workload="mnist_cnn", backend=b, batch=256, step=s, seed=i)
             for i, (b, s) in enumerate((("torch", 0.1), ("jax", 0.16)))]
    return [matmul("numpy", "fp32", 310.0), mnist[0], matmul("torch", "fp32", 352.8),
            llama_result("fp32", tg=25.0), matmul("jax", "fp32", 290.0), mnist[1],
            llama_result("fp32", tg=20.0, backend="jax"), matmul("jax", "bf16", 600.0)]


def printed(results, width: int, *, terminal: bool = True) -> str:
    console = Console(file=io.StringIO(), width=width, force_terminal=terminal, color_system=None)
    print_run_output(analyse(results), console, "results/run.jsonl")
    return console.file.getvalue()


def table_part(text: str) -> list[str]:
    return text.split("\nAnswer:")[0].splitlines()


@pytest.mark.parametrize("terminal", [True, False])
@pytest.mark.parametrize("width", [80, 100])
def test_the_summary_fits_shows_the_dtype_groups_rows_and_defines_its_marks(width, terminal):
    text = printed(mixed_run(), width, terminal=terminal)
    lines = table_part(text)
    assert max(len(line) for line in text.splitlines()) <= width, max(text.splitlines(), key=len)
    assert "…" not in text
    header = next(line for line in lines if "dtype" in line)
    for column in ("test", "numpy", "torch", "jax", "fastest", "ratio"):
        assert column in header, (column, header)
    body = lines[lines.index(header) + 2:]
    # one row per workload x test x dtype, matmul's rows together although the run interleaved them
    rows = [i for i, line in enumerate(body) if "N=2048" in line]
    assert len(rows) == 2 and rows[1] - rows[0] <= 2
    assert any("bf16" in body[i] for i in rows) and any("fp32" in body[i] for i in rows)
    assert [line for line in body if "b256" in line] and [line for line in body if "pp512" in line]
    fp32 = next(body[i] for i in rows if "fp32" in body[i])
    assert re.search(r"353 ±\d+%.*torch\s+1\.\d\dx", fp32), fp32     # torch is the fastest fp32 matmul
    legend = "\n".join(body)
    cells = " ".join(body[: next(i for i, line in enumerate(body) if line.startswith("±"))])
    for mark, meaning in ((NOISY, "noisy"), (UNSURE, "not significant"), (NOT_RUN, "not run")):
        if re.search(rf"\S{re.escape(mark)}(\s|$)", cells) or f" {mark} " in f" {cells} ":
            assert f"{mark} {meaning}" in legend, (mark, legend)
    assert "± half the 95% interval" in legend
    assert text.count("FLOP/s ceilings not measured") <= 1


def test_a_language_model_has_a_row_per_runtime_and_format_each_with_pp_tg_and_its_bandwidth_share():
    """Issue 50 item 7: a language model leaves the summary's columns for a table of its own, a row per runtime x
    format, every runtime's tg with its share of the bandwidth bound, the fastest of each format marked."""
    data = ResultSet.load(analyse([llama_result("bf16", tg=40.0), llama_result("bf16", tg=30.0, backend="jax"),
                                   llama_result("fp32", tg=20.0, backend="jax")]))
    assert summary_table(data.frame, data).empty
    frame = runtime_table(data.frame).frame()
    assert list(zip(frame["format"], frame["runtime"])) == [("fp32", "jax"), ("bf16", "torch"), ("bf16", "jax")]
    assert frame["model"].iloc[0] == "smollm-135m" and list(frame["model"].iloc[1:]) == ["", ""]
    assert frame["test"].iloc[0] == "pp512/tg128"
    assert [t.split(" ")[0] for t in frame["tg t/s"]] == ["20.0", "40.0", "30.0"]
    assert list(frame["of bw bound"]) == [f"{tg / (18e9 / 270e6):.0%}" for tg in (20.0, 40.0, 30.0)]
    assert list(frame["fastest"]) == ["", "fastest", ""]                  # fp32 had one runtime: nothing to rank
    assert "of bw bound: tg against" in runtime_table(data.frame).note


def test_a_cut_preset_is_named_with_its_layers():
    r = llama_result("fp32")
    r.metrics["architecture"] = "smollm-135m (n_layers 4)"
    data = ResultSet.load(analyse([r]))
    assert runtime_table(data.frame).frame()["model"].iloc[0] == "smollm-135m 4/30 layers"


def test_columns_no_row_fills_are_dropped():
    data = ResultSet.load(analyse([matmul("torch", "fp32", 300.0)]))
    names = [c.name for c in summary_table(data.frame, data).columns]
    assert names == ["workload", "test", "dtype", "torch"]     # one backend: no fastest, no ratio, no bound


def test_the_progress_line_says_which_statistic_each_figure_is():
    line = generation_line({"batch": 1, "prompt_len": 64, "new_tokens": 16, "prefill_tokens_per_s": 3702.0,
                            "ttft_s": 0.01729, "decode_tokens_per_s": 31.5, "decode_token_s": 1 / 31.5,
                            "decode_token_p50_s": 0.00727})
    assert line == ("pp64 3,702 tok/s (median prefill 17.29 ms), tg16 31.5 tok/s (median round's mean step 31.75 ms; "
                    "median single step 7.27 ms)")
    # the round's mean step is the tok/s figure's own statistic: 1 / 31.5 tok/s
    assert f"{1 / 31.5 * 1e3:.2f} ms" in line


def test_the_ceiling_note_is_below_the_table_once_in_cli_words():
    results = [dataclasses.replace(r, fingerprint={**r.fingerprint, "ceilings": {
        "ceilings": {}, "bandwidth": {}, "missing": [f"{r.case.backend}/cpu/fp32"], "note": "x"}})
        for r in mixed_run()[:3]]
    text = printed(results, 100)
    assert text.count("FLOP/s ceilings not measured") == 1
    assert text.index("FLOP/s ceilings") > text.index("ratio") and text.index("FLOP/s ceilings") < text.index("Answer:")
    assert "`xpubench ceilings`" in text and "measure_ceilings=" not in text


@pytest.mark.slow
def test_every_recorded_run_still_loads_and_prints():
    from xpubench.analysis import load

    for path in sorted((DATA / "runs").glob("*.jsonl")):
        console = Console(file=io.StringIO(), width=80, color_system=None)
        print_run_output(load([path]), console, path.name)
        text = console.file.getvalue()
        assert ("Summary on cpu" in text or "Language models on cpu" in text) and "Answer:" in text
        assert max(len(line) for line in text.splitlines()) <= 80


def test_two_processes_a_side_make_the_comparison_not_provisional_and_the_tg_row_has_its_share():
    """The default run's llama comparison as recorded with two processes a side (tests/data/runs/README.md)."""
    from xpubench.analysis import load
    from xpubench.report.sentences.answer import answer_lines

    loaded = load([DATA / "runs" / "llama-brief-zen3.jsonl"])
    data = ResultSet.load(loaded)
    assert [len(r.ok_runs) for f in loaded for r in f.results] == [2, 2]
    lines = answer_lines(data)
    assert [line for line in lines if line.startswith("- smollm-135m 4/30 layers, pp64/tg16: fastest jax cpu, ")], lines
    assert not [line for line in lines if "provisional" in line], lines
    frame = runtime_table(data.frame).frame()
    assert all(re.fullmatch(r"\d+%", share) for share in frame["of bw bound"]) and len(frame) == 2
    assert list(frame["fastest"]).count("fastest") == 1
