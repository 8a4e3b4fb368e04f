"""`xpubench compare --fail-on`: a real slowdown fails (exit 1), unchanged reruns on a noisy machine pass, the
1.79x pair of docs/methodology.md (one process a side) can't fail a build, rows grouped, geometric mean,
thresholds per metric, bad input in one line."""

import json
from pathlib import Path

import numpy as np
import pytest

from xpubench.cli import main
from xpubench.report.compare import compare_files
from xpubench.report.compare_gate import geometric_mean, group_of, parse_fail_on

GATE = Path(__file__).resolve().parent / "data" / "gate"
BASE, RERUN, SLOWER = (GATE / f"{n}.jsonl" for n in ("base", "rerun", "slower"))
CASE = "matmul/numpy/cpu/matmul/fp32/n384"


def cli(capsys, *args):
    code = main(["compare", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_real_slowdown_fails_and_unchanged_reruns_pass(capsys):
    code, out, err = cli(capsys, BASE, SLOWER, "--fail-on", "5%")
    assert code == 1, err
    assert f"FAIL slower vs base: {CASE}: 1.98x slower" in out and "Slower (1)" in out
    code, out, err = cli(capsys, BASE, RERUN, "--fail-on", "5%")
    assert code == 0, out + err
    assert "Not significant (1)" in out and "compare --fail-on: passed" in out


def test_unchanged_rerun_passes_although_its_processes_spread_1_8x():
    """The rerun's processes ran 1.57 to 2.87 ms (the busy machine's doing): no threshold makes it fail."""
    [c] = compare_files(BASE, RERUN, min_change=0.01)
    [row] = c.rows
    assert (row.processes_a, row.processes_b) == (3, 3) and not row.significant and group_of(row) == "not significant"


def test_without_fail_on_the_exit_is_0_even_for_a_slowdown(capsys):
    code, out, _ = cli(capsys, BASE, SLOWER)
    assert code == 0 and "1.98x slower" in out and "fail-on" not in out


def test_gate_verdict_in_json_and_on_stderr(capsys):
    code, out, err = cli(capsys, BASE, RERUN, SLOWER, "--fail-on", "5%", "--format", "json", "-o", "-")
    assert code == 1
    same, slowed = json.loads(out)   # stdout: the JSON alone
    assert same["gate"]["passed"] and same["gate"]["failed"] == []
    assert not slowed["gate"]["passed"] and [g["key"] for g in slowed["gate"]["failed"]] == [CASE]
    assert slowed["rows"][0]["group"] == "slower" and slowed["geometric_mean"] == pytest.approx(1.977, abs=0.01)
    assert slowed["gate"]["thresholds"] == {"default": 0.05, "named": {}}
    assert "FAIL slower vs base" in err and "FAILED" in err


def test_a_threshold_above_the_change_passes_and_per_metric_thresholds_pick_their_rows(capsys):
    assert cli(capsys, BASE, SLOWER, "--fail-on", "150%")[0] == 0        # 1.98x < 2.5x
    assert cli(capsys, BASE, SLOWER, "--fail-on", "warm_s=50%")[0] == 1   # its timing named
    assert cli(capsys, BASE, SLOWER, "--fail-on", "matmul=50%")[0] == 1   # its mode named
    assert cli(capsys, BASE, SLOWER, "--fail-on", "step_s=5%")[0] == 0    # training only: matmul ungated
    code, out, _ = cli(capsys, BASE, SLOWER, "--fail-on", "5%,warm_flops_per_s=120%")   # the named one wins
    assert code == 0 and "passed" in out


@pytest.mark.parametrize("text, message", [
    ("5", None), ("5%,step_s=3%", None), ("0.5%", None),
    ("abc", "is not PCT or METRIC=PCT"), ("5%,6%", "two default thresholds"),
    ("foo=3%", "unknown metric 'foo'"), ("0%", "above 0"), ("step_s=3%,step_s=4%", "given twice"),
])
def test_fail_on_parsing(capsys, text, message):
    if message is None:
        t = parse_fail_on(text)
        assert t.smallest > 0
        return
    code, _, err = cli(capsys, BASE, RERUN, "--fail-on", text)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


# ---- the 1.79x pair: five back-to-back runs of one unchanged case (docs/methodology.md) --------------------
# warm 61.3, 60.8, 61.4, 58.2 and 34.2 GFLOP/s, each process tight: the fifth alone read "1.79x slower".
# No results file of it was kept; it is rebuilt here from those per-process medians (as tests/test_compare.py).

def process_file(path: Path, gflops: list[float], seed: int) -> Path:
    from xpubench.results import store
    from xpubench.results.schema import SCHEMA_VERSION, Run

    template = store.load_file(BASE).runs[0]
    flops = 2 * 384 ** 3
    rng = np.random.default_rng(seed)
    for i, g in enumerate(gflops):
        median = flops / (g * 1e9)
        spread = np.abs(rng.normal(0, 0.03, 3))
        warm = sorted([median, *(median * (1 + spread)), *(median * (1 - spread))])
        store.append(path, Run(**{**template.__dict__, "samples": {"warm_s": warm},
                                  "metrics": {**template.metrics, "warm_s": median}, "machine": {},
                                  "process": i, "processes": len(gflops), "schema_version": SCHEMA_VERSION}))
    return path


def test_the_1_79x_pair_of_unchanged_runs_passes_the_gate(tmp_path, capsys):
    first = process_file(tmp_path / "run1.jsonl", [61.3], seed=1)
    fifth = process_file(tmp_path / "run5.jsonl", [34.2], seed=2)
    code, out, err = cli(capsys, first, fifth, "--fail-on", "5%", "--format", "json", "-o", "-")
    [c] = json.loads(out)
    assert c["rows"][0]["verdict"].endswith("x slower (provisional)") and c["rows"][0]["ratio"] > 1.7
    assert code == 0, err   # one process a side: not gated, said so
    assert [g["key"] for g in c["gate"]["not_gated"]] == [CASE] and "not gated" in err
    # the same runs as processes of one case each side: one slow process is noise, not a regression
    steady = process_file(tmp_path / "steady.jsonl", [61.3, 60.8, 61.4, 58.2, 60.1], seed=3)
    one_slow = process_file(tmp_path / "one-slow.jsonl", [60.9, 34.2, 61.0, 59.7, 61.2], seed=4)
    all_slow = process_file(tmp_path / "all-slow.jsonl", [47.3, 46.1, 47.9, 45.0, 46.8], seed=5)
    assert cli(capsys, steady, one_slow, "--fail-on", "5%")[0] == 0
    assert cli(capsys, steady, all_slow, "--fail-on", "5%")[0] == 1   # every process ~1.3x slower


def test_a_case_that_crashed_in_b_fails_the_gate(tmp_path, capsys):
    record = json.loads(RERUN.read_text().splitlines()[0])
    record.update(status="crash", message="worker died (signal 11)", samples={}, metrics={}, processes=1)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(record) + "\n")
    code, out, _ = cli(capsys, BASE, broken, "--fail-on", "5%")
    assert code == 1 and "ok in A, failed in B" in out and "n/a (1)" in out


def test_rows_grouped_and_geometric_mean(capsys):
    code, out, _ = cli(capsys, BASE, RERUN, SLOWER, "--format", "md")
    assert code == 0
    assert out.index("### Not significant (1)") < out.index("### Slower (1)")   # one group per comparison
    assert "geometric mean of B/A over 1 matching case(s): 1.977 (1.98x slower)" in out

    class Row:
        def __init__(self, ratio):
            self.ratio = ratio
    assert geometric_mean([Row(2.0), Row(0.5), Row(None)]) == pytest.approx(1.0)
    assert geometric_mean([Row(None)]) is None
