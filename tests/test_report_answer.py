"""The answer `xpubench run` ends with (report/sentences/answer.py), on results files made here with known
per-process figures (the samples come from the test, not from this machine)."""

import re

import numpy as np
import report_runs as runs

from xpubench.report.base.frame import ResultSet
from xpubench.report.sentences.answer import answer_lines
from xpubench.results import store
from xpubench.results.schema import SCHEMA_VERSION, Run

FLOPS = 2 * runs.MATMUL_N ** 3


def write_case(path, backend: str, gflops: list[float], seed: int = 0, status: str = "ok", message: str = ""):
    """Append the numpy matmul case, relabelled as ``backend``, one process per entry of ``gflops``."""
    template = store.load_file(runs.recorded_pair()[0]).runs[0]
    case = {**template.case, "backend": backend, "key": template.case["key"].replace("numpy", backend),
            "run_id": f"{template.case['run_id']}-{backend}"}
    rng = np.random.default_rng(seed)
    for i, g in enumerate(gflops):
        median = FLOPS / (g * 1e9)
        spread = np.abs(rng.normal(0, 0.03, 3))
        warm = sorted([median, *(median * (1 + spread)), *(median * (1 - spread))])
        ok = status == "ok"
        store.append(path, Run(**{**template.__dict__, "case": case, "status": status, "message": message,
                                  "samples": {"warm_s": warm} if ok else {},
                                  "metrics": {**template.metrics, "warm_s": median,
                                              "warm_flops_per_s": FLOPS / median} if ok else {},
                                  "process": i, "processes": len(gflops), "schema_version": SCHEMA_VERSION}))


def answer(path) -> str:
    return "\n".join(answer_lines(ResultSet.load(store.load_results([path])), path))


def test_a_clear_winner_is_named_with_its_interval(tmp_path):
    path = tmp_path / "clear.jsonl"
    write_case(path, "numpy", [61.3, 60.8, 61.4], seed=1)
    write_case(path, "torch", [30.1, 29.6, 30.4], seed=2)
    write_case(path, "jax", [45.9, 25.2, 46.0, 44.7, 46.2], seed=3)     # one process far slower: bimodal
    write_case(path, "keras", [1.0], status="skipped", message="keras is not installed")
    text = answer(path)
    line = next(x for x in text.splitlines() if x.startswith("- matmul"))
    assert "fastest here numpy cpu at N=384" in line and "as fast as jax cpu" in line, text  # the runner-up
    ratio, low, high = (float(v)
                        for v in re.search(r"([\d.]+)x as fast as .*interval ([\d.]+)-([\d.]+)", line).groups())
    assert low <= ratio <= high and 1.2 < ratio < 1.5 and low > 1, line
    assert "noisy:" in text and "matmul/jax/cpu/matmul/fp32/n384 (processes: bimodal)" in text
    assert "did not finish: matmul/keras/cpu/matmul/fp32/n384: skipped (keras is not installed)" in text
    assert f"- results: {path}" in text and f"\n  xpubench report {path} -o report.html" in text


def test_a_difference_within_the_noise_is_not_significant(tmp_path):
    path = tmp_path / "close.jsonl"
    write_case(path, "numpy", [61.3, 60.8, 61.4], seed=1)
    write_case(path, "torch", [61.0, 61.5, 60.6], seed=2)
    text = answer(path)
    line = next(x for x in text.splitlines() if x.startswith("- matmul"))
    assert "not significant against" in line and "as fast as" not in line, line
    assert "noisy: none flagged" in text and "did not finish" not in text
