"""`xpubench fleet` on a real Slurm (issue 49 item 2): the one-node cluster of tests/slurm_cluster.py (munged,
slurmctld and slurmd from Debian's packages, on 127.0.0.1), the conftest ``slurm`` fixture.

- Two ``[[machine]]`` entries on one partition (one job array), matmul and mnist_cnn: Ctrl-C (SIGINT to the
  fleet) mid-way cancels the jobs and keeps what arrived, ``squeue`` is empty; ``--resume`` finishes the run;
  DIR holds two results files that ``site DIR`` and ``compare DIR`` read.
- A job that fails (its setup exits 7) or that is cancelled from outside: Slurm's state and the tail of the
  job's log are that machine's result, no silent gap.
- An unknown partition: one line, nothing submitted.

To run the cluster by hand: ``python tests/slurm_cluster.py /tmp/slurm`` (prints the SLURM_CONF to export)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xpubench import cli

RUN = """[run]
workload = ["matmul", "mnist_cnn"]
backend = ["torch"]
precision = ["fp32"]
size = [64]
quick = true
epochs = 1
train_samples = 512
processes = 2
"""
TWO_ON_ONE_PARTITION = RUN + """
[[machine]]
name = "node-a"
slurm = { partition = "debug", time = "00:10:00" }

[[machine]]
name = "node-b"
slurm = { partition = "debug", time = "00:10:00" }
"""
WAIT_S = 400


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _queued(slurm, names: str) -> list[str]:
    """This test's jobs still in the queue (by name: another test process may share the cluster)."""
    return slurm.run("squeue", "-h", "-n", names, "-o", "%i").stdout.split()


def _wait(until, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not until():
        assert time.monotonic() < deadline, f"{what} not within {seconds:g} s"
        time.sleep(0.5)


def test_an_unknown_partition_is_one_line_and_nothing_is_submitted(slurm, tmp_path, capsys):
    (tmp_path / "fleet.toml").write_text(RUN + '[[machine]]\nname = "gpu"\nslurm = { partition = "gpu" }\n')
    assert cli.main(["fleet", str(tmp_path / "fleet.toml"), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "machine 'gpu': partition 'gpu' is not one of this cluster's (batch, debug; `sinfo`)" in err
    assert not (tmp_path / "out").exists() and _queued(slurm, "xpubench-gpu") == []


@pytest.mark.slow
def test_a_fleet_on_slurm_interrupted_then_resumed(slurm, tmp_path, capsys, one_thread_workers):
    """The issue's "what it must show" for Slurm, end to end."""
    (tmp_path / "fleet.toml").write_text(TWO_ON_ONE_PARTITION)
    out = tmp_path / "out"
    files = [out / "node-a.jsonl", out / "node-b.jsonl"]
    fleet = subprocess.Popen([sys.executable, "-m", "xpubench", "fleet", str(tmp_path / "fleet.toml"), "-o", str(out),
                              "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait(lambda: any(_lines(f) for f in files) or fleet.poll() is not None, WAIT_S, "a first result")
        fleet.send_signal(signal.SIGINT)
        said, _ = fleet.communicate(timeout=WAIT_S)
    finally:
        if fleet.poll() is None:
            fleet.kill()
    assert fleet.returncode == 130, said
    assert "interrupted: cancelling the jobs it started (what arrived is kept)" in said
    assert "running" in said and _queued(slurm, "xpubench-node-a") == []   # followed by squeue, cancelled by scancel
    arrived = {f: _lines(f) for f in files}
    assert any(arrived.values())
    assert "cancelled" in said
    state = json.loads((out / "fleet.json").read_text())
    assert {state[m]["job"].split("_")[0] for m in ("node-a", "node-b")} == {state["node-a"]["job"].split("_")[0]}

    assert cli.main(["fleet", "--resume", str(out), "--no-progress"]) == 0
    said = capsys.readouterr().out
    assert "node-a: done (2/2 cases)" in said and "node-b: done (2/2 cases)" in said
    assert "node-a: torch" in said and "node-b: torch" in said   # the summary: a column per machine
    assert _queued(slurm, "xpubench-node-a") == []
    for f in files:
        lines = _lines(f)
        assert lines[:len(arrived[f])] == arrived[f]            # what arrived before the interrupt is kept
        assert len(lines) == 2 * 2                              # 2 cases x 2 processes
        assert {json.loads(line)["fingerprint"]["fleet_machine"]["name"] for line in lines} == {f.stem}

    assert cli.main(["site", str(out), "-o", str(tmp_path / "site")]) == 0
    assert "2 runs, 4 cases" in capsys.readouterr().out
    assert cli.main(["compare", str(out)]) == 0
    said = capsys.readouterr().out
    assert "A: node-a" in said and "B: node-b" in said and "matching case(s)" in said


@pytest.mark.slow
def test_a_job_slurm_ended_is_that_machines_result_with_its_log(slurm, tmp_path):
    """A job whose setup fails (exit 7) and one cancelled by someone else: Slurm's state and the log's tail."""
    (tmp_path / "fleet.toml").write_text(RUN + """
[[machine]]
name = "broken"
slurm = { setup = "echo module cuda/99 not found >&2; exit 7" }

[[machine]]
name = "cut"
slurm = { setup = "sleep 120", partition = "batch" }
""")
    out = tmp_path / "out"
    fleet = subprocess.Popen([sys.executable, "-m", "xpubench", "fleet", str(tmp_path / "fleet.toml"), "-o", str(out),
                              "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def running() -> list[str]:
            listed = slurm.run("squeue", "-h", "-n", "xpubench-cut", "-t", "RUNNING", "-o", "%i").stdout.split()
            return listed or (fleet.poll() is not None and ["gone"])
        _wait(running, WAIT_S, "the job of machine cut")
        slurm.run("scancel", *running())
        said, _ = fleet.communicate(timeout=WAIT_S)
    finally:
        if fleet.poll() is None:
            fleet.kill()
    assert fleet.returncode == 3, said   # no machine finished
    assert "broken: failed: Slurm: FAILED (exit code 7)" in said
    assert "module cuda/99 not found" in said   # the tail of its log
    assert "cut: failed: Slurm: CANCELLED" in said
    assert _queued(slurm, "xpubench-broken,xpubench-cut") == []
    assert not list(out.glob("*.jsonl"))
