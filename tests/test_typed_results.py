"""A loaded result is typed (issue 53 item 1, schema version 3): its case a ``Case`` as this version plans it
(an older line migrated once, on load), its figures its mode's declared dataclass, and the notebook's frame
typed as the figures are, in one place (report/base/frame.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import xpubench
from xpubench import analysis
from xpubench.case import Case

DATA = Path(__file__).parent / "data"
REPORT = DATA / "runs" / "report-zen3.jsonl"   # version 2 lines, two processes per case


@pytest.fixture(scope="module")
def report_results():
    (loaded,) = analysis.load([REPORT])
    return loaded


def test_a_loaded_result_holds_a_case_and_its_modes_figures(report_results):
    train = next(r for r in report_results.results if r.key == "mnist_cnn/torch/cpu/train/fp32/b256")
    assert isinstance(train.case, Case) and (train.case.batch_size, train.case.devices) == (256, 1)
    m = train.metrics
    assert type(m).__name__ == "LoadedTrainMetrics" and isinstance(m.step_s, float)
    assert type(m.steps_per_epoch) is int and m.global_batch == train.case.global_batch == 256
    assert m.tokens_per_s is None and "tokens_per_s" not in m   # declared, not measured: None, never 0
    assert m["step_s"] == m.step_s and dict(m)["samples_per_s"] == m.samples_per_s   # the line's mapping too
    with pytest.raises(AttributeError):
        m.no_such_figure = 1   # a misspelt figure can't vanish
    generate = next(r for r in report_results.results if r.mode == "generate")
    assert type(generate.metrics).__name__ == "LoadedGenerateMetrics" and type(generate.metrics.new_tokens) is int


def test_a_whole_number_stays_whole_as_the_median_over_processes():
    (loaded,) = analysis.load([DATA / "runs" / "default-zen3-quiet.jsonl"])
    train = next(r for r in loaded.results if r.key == "mnist_cnn/torch/cpu/train/fp32/b256")
    assert len(train.ok_runs) == 3 and type(train.metrics.steps_per_epoch) is int   # median of [2, 2, 2]: 2, not 2.0
    assert type(train.metrics.global_batch) is int and type(train.metrics.step_s) is float


def test_the_lines_stay_as_written(report_results):
    run = report_results.runs[0]
    assert run.schema_version == 2 and isinstance(run.case, dict)
    assert json.loads(REPORT.read_text().splitlines()[0])["case"] == run.case


def test_an_older_files_cases_are_migrated_to_the_case_this_version_plans():
    (seed,) = analysis.load([DATA / "records" / "seed.jsonl"])
    selftest = [r for r in seed.results if r.case.workload == "selftest"]
    # recorded without a batch size (before every case had one): at the batch the planner gives it
    assert selftest and all(r.case.batch_size == 1 and "/b1/" in r.key for r in selftest)
    assert all(r.runs[0].case.get("batch_size") is None for r in selftest)   # the line as written
    # a llama case written before two of its key options existed is alike a newer file's: they compare
    older, newer = (xpubench.load([DATA / "runs" / name]) for name in ("llama-brief-zen3.jsonl",
                                                                        "llama-three-zen3.jsonl"))
    assert set(older[older.workload == "llama"]["alike"]) == set(newer[newer.workload == "llama"]["alike"])


def test_the_frame_is_typed_as_the_figures_are():
    frame = xpubench.load([REPORT])
    types = {c: str(t) for c, t in frame.dtypes.items()}
    for column in ("batch_size", "devices", "global_batch", "steps_per_epoch", "new_tokens", "peak_memory_bytes"):
        assert types[column] == "Int64", column   # a whole number never passes through a float
    for column in ("step_s", "samples_per_s", "decode_tokens_per_s"):
        assert types[column] == "float64", column
    gpt = frame[frame.key == "gpt/jax/cpu/train/fp32/b16"].iloc[0]    # skipped by the budget: nothing measured
    assert gpt["status"] == "skipped" and pd.isna(gpt["step_s"]) and gpt["global_batch"] is pd.NA   # n/a, never 0


def test_a_count_or_a_compile_not_recorded_is_n_a_never_0():
    """After the planner nothing decides a figure: a serving point's failures, a target's seeds reached and
    a compile time the mode does not record read as n/a (unknown), not 0."""
    from xpubench.report.tables.serving import _failed
    from xpubench.report.tables.target import reached_cell
    from xpubench.report.tables.user_cost import compiled_apart_s

    assert _failed(pd.Series({"requests": 10, "failed": None, "timeouts": None})) == "n/a of 10"
    assert _failed(pd.Series({"requests": 10, "failed": 2, "timeouts": 1})) == "2 of 10 (1 timed out)"
    assert reached_cell(pd.Series({"seeds": 3, "seeds_reached": None})) == "n/a"
    assert reached_cell(pd.Series({"seeds": 3, "seeds_reached": 2})) == "2/3"
    # compile_s None is eager (results/metrics_train.py, metrics_generate.py): nothing compiled apart;
    # a matmul records no compile: unknown
    assert compiled_apart_s(pd.Series({"mode": "generate", "compile_s": None})) == 0.0
    assert compiled_apart_s(pd.Series({"mode": "matmul"})) is None
    assert compiled_apart_s(pd.Series({"mode": "train", "compile_s": 1.5})) == 1.5
