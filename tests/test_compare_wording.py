"""`xpubench compare`'s words (issue 52 item 9): a ratio that rounds to 1.00x is "the same", never "1.00x
slower"; a difference in CPU kernels is claimed as a likely cause only where both files recorded those
kernels; a side that never loaded the library says "not recorded". A is the recorded quiet default run's numpy
matmul case (tests/data/runs); B the same case as a numpy-only run records it: no torch or XLA kernels in its
fingerprint, its times 0.4% longer."""

from __future__ import annotations

import report_runs

from xpubench.cli import main
from xpubench.report.tables.environment import LIKELY_CAUSE
from xpubench.report.tables.frameworks import faster_text
from xpubench.results.ratio import RatioEstimate

QUIET = report_runs.Path(__file__).parent / "data" / "runs" / "default-zen3-quiet.jsonl"
NUMPY = "matmul/numpy/"


def numpy_case(record):
    return record if record["case"]["key"].startswith(NUMPY) else None


def numpy_only(record):
    """The case as a run that imported numpy alone records it, each time 0.4% longer."""
    if numpy_case(record) is None:
        return None
    kernels = record["fingerprint"]["kernels"]
    kernels = {"libraries": [lib for lib in kernels["libraries"] if lib.get("used_by") == "numpy"]}
    record["fingerprint"] = {**record["fingerprint"], "kernels": kernels}
    record["samples"] = {k: [v * 1.004 for v in vs] for k, vs in record["samples"].items()}
    return record


def test_a_library_b_never_loaded_is_not_recorded_and_a_ratio_near_1_is_the_same(capsys):
    a = report_runs.rewritten(QUIET, "a.jsonl", numpy_case)
    b = report_runs.rewritten(QUIET, "b.jsonl", numpy_only)
    assert main(["compare", str(a), str(b)]) == 0
    out = " ".join(capsys.readouterr().out.split())   # the console's line breaks left out
    assert "- torch CPU kernels: ATen AVX2, BLAS mkl, MKL 2024.2, oneDNN 3.12.0, 2 threads (A) vs not recorded (B) " \
        "- XLA CPU target: this CPU's own features (A) vs not recorded (B) " in out, out
    assert LIKELY_CAUSE not in out and "differ" not in out.split("the environments differ:")[1].split("(B) against")[0]
    assert "geometric mean of B/A over 1 matching case(s): 1.004 (the same (1.00x))" in out and "x slower" not in out

def test_a_speed_that_rounds_to_1_is_the_same_in_the_backend_table():
    same = RatioEstimate(1.003, 0.97, 1.04, False, "not significant")
    assert faster_text(same, "numpy", "torch") == "numpy and torch: the same (1.00x) [95% CI 0.97-1.04x]"
    slower = RatioEstimate(1 / 1.25, 0.7, 0.9, True, "1.25x faster")
    assert faster_text(slower, "numpy", "torch") == "numpy is 1.25x faster than torch [95% CI 1.11-1.43x]"
