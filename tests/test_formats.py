"""Machine-readable output on stdout (`-o - --format md|csv|json|jsonl`): a real `xpubench run` read as CSV,
`report` as CSV/JSON/Markdown, `compare --format json`, and nothing but the table on stdout."""

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xpubench.cli import main
from xpubench.publish.rows import COLUMNS

DATA = Path(__file__).resolve().parent / "data"
QUIET = DATA / "runs" / "default-zen3-quiet.jsonl"
GATE = DATA / "gate"


def cli(capsys, *args):
    code = main([*map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_run_prints_csv_to_stdout_and_the_results_file_is_kept(tmp_path):
    """The cheapest real run (numpy matmul N=64): stdout is one CSV header and one row; progress, the tables
    and the answer went to stderr; the results file is written in the working folder."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "xpubench", "run", "-w", "matmul", "-b", "numpy", "-p", "fp32",
                           "--size", "64", "--time-budget", "0.2", "--processes", "2", "-o", "-", "--format", "csv"],
                          check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    [row] = list(csv.DictReader(io.StringIO(done.stdout)))
    assert tuple(row) == COLUMNS
    assert row["key"] == "matmul/numpy/cpu/matmul/fp32/n64" and row["status"] == "ok"
    assert row["processes"] == "2" and int(row["samples"]) >= 3 and row["timing"] == "warm_s"
    time_s, low, high = float(row["time_s"]), float(row["time_ci95_low_s"]), float(row["time_ci95_high_s"])
    assert 0 < low <= time_s <= high < 1
    assert row["figure"] == "warm_flops_per_s" and row["unit"] == "FLOP/s"
    # the rate: the median of the processes' rates, near the FLOPs over the median time (not equal: 2 processes)
    assert float(row["value"]) == pytest.approx(2 * 64 ** 3 / time_s, rel=0.5)
    [results] = list(tmp_path.glob("xpubench-*.jsonl"))
    assert row["source"] == results.name and "results:" in done.stderr


def test_report_rows_as_csv_json_and_jsonl_agree(capsys):
    code, out, err = cli(capsys, "report", QUIET, "-o", "-", "--format", "csv")
    assert code == 0, err
    table = list(csv.DictReader(io.StringIO(out)))
    code, out, _ = cli(capsys, "report", QUIET, "-o", "-", "--format", "json")
    rows = json.loads(out)
    code, out, _ = cli(capsys, "report", QUIET, "--format", "jsonl")   # csv/json/jsonl: stdout by default
    lines = [json.loads(x) for x in out.splitlines()]
    assert len(table) == len(rows) == len(lines) == 7 and rows == lines
    llama = next(r for r in rows if r["key"].startswith("llama/torch"))
    assert llama["figure"] == "decode_tokens_per_s" and llama["unit"] == "tok/s" and llama["processes"] == 3
    # the median of the processes' median rounds' mean step, and the rate it gives one sequence
    assert llama["time_s"] == pytest.approx(0.021211, abs=1e-5) and llama["value"] == pytest.approx(1 / llama["time_s"])
    row = next(r for r in table if r["key"] == llama["key"])
    assert float(row["value"]) == pytest.approx(llama["value"])


@pytest.mark.slow
def test_report_markdown_on_stdout_is_the_report_without_charts(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "report", QUIET, "-o", "-", "--format", "md")
    assert code == 0, err
    assert out.startswith("<!-- generator: xpubench") and "# xpubench report" in out and "| " in out
    assert "![" not in out and "Charts are left out" in out
    assert list(tmp_path.iterdir()) == []   # no file, no chart folder


def test_compare_json_on_stdout_is_parsed(capsys):
    code, out, err = cli(capsys, "compare", GATE / "base.jsonl", GATE / "slower.jsonl", "-o", "-", "--format", "json")
    assert code == 0 and err == ""
    [c] = json.loads(out)
    [row] = c["rows"]
    assert row["group"] == "slower" and row["ratio"] == pytest.approx(1.977, abs=0.01)
    assert row["ci_low"] > 1 and c["geometric_mean"] == pytest.approx(row["ratio"])
    code, out, _ = cli(capsys, "compare", GATE / "base.jsonl", GATE / "rerun.jsonl", "--format", "csv")
    [row] = list(csv.DictReader(io.StringIO(out)))
    assert row["group"] == "not significant" and row["processes_a"] == row["processes_b"] == "3"


def test_markdown_table_escapes_a_hostile_name():
    from xpubench.publish.formats import markdown_table

    row = dict.fromkeys(COLUMNS) | {"key": "m|<script>alert(1)</script>", "status": "ok", "processes": 1}
    text = markdown_table([row])
    assert "<script>" not in text and "\\|" in text and text.count("\n") == 3


@pytest.mark.parametrize("args, message", [
    (["run", "-w", "matmul", "--format", "csv"], "--format goes with -o -"),
    (["run", "-w", "matmul", "-o", "-"], "give --format"),
    (["report", str(QUIET), "-o", "x.csv", "--format", "csv"], "use -o -"),
    (["report", str(QUIET), "-o", "-", "--format", "html"], "give --format"),
    (["run", "-o", "-", "--format", "xml"], "invalid choice"),
])
def test_bad_format_flags_are_one_line(capsys, args, message):
    code, out, err = cli(capsys, *args)
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1
