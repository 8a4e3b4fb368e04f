"""The spread table says each warning of a case once (issue 52 item 9): a warning its worker processes each
raised is one flag naming the processes it applies to, with the range of their figures, not one copy per
process (recorded runs of tests/data/runs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xpubench import analysis
from xpubench.report.base.frame import ResultSet
from xpubench.report.tables.spread import spread_table

RUNS = Path(__file__).parent / "data" / "runs"


def flags(name: str) -> dict[str, str]:
    table = spread_table(ResultSet.load(analysis.load([RUNS / name])))
    return dict(zip(table["case"], table["flag"]))


@pytest.mark.parametrize("name", ["default-zen4.jsonl", "llama-brief-zen3.jsonl", "default-zen3-quiet.jsonl"])
def test_no_flag_repeats_a_warning(name):
    for case, flag in flags(name).items():
        words = [re.sub(r"\d+(?:[.,]\d+)*", "#", part.split(", in ")[0]) for part in flag.rstrip(" !").split("; ")]
        assert len(words) == len(set(words)), (case, flag)


def test_a_warning_of_several_processes_names_them_and_spans_their_figures():
    said = flags("default-zen4.jsonl")["matmul/numpy/cpu/matmul/fp32/n1024"]
    assert said == "unstable: stdev is 12-21% of the mean (>= 10%), in each of the 2 processes !"
    brief = flags("llama-brief-zen3.jsonl")["llama/torch/cpu/generate/fp32/b1/4/64/16"]
    assert brief == ("prefill: only 2 sample(s): spread unknown, in each of the 2 processes; decode: unstable: stdev "
                     "is 27% of the mean (>= 10%), in process 2 of 2 !")


def test_the_cases_own_warning_stays_whole_beside_a_process_one():
    said = flags("default-zen3-quiet.jsonl")["matmul/torch/cpu/matmul/fp32/n2048"]
    parts = said.rstrip(" !").split("; ")
    assert parts[0] == "unstable: stdev is 31% of the mean (>= 10%), in process 1 of 3"
    assert parts[1] == "time budget cut the sample count, in process 2 of 3"
    assert parts[2].startswith("bimodal: 1 of 3 processes ran 1.32x faster than the others")
