"""Kill a real `xpubench run` mid-sweep (SIGKILL, torn last line), then `--resume`: every worker process
of the plan (each case twice) ends in the file exactly once, and the orphaned worker never adds a record."""

import collections
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_distributed import xpubench_run

from xpubench import cli
from xpubench.api import plan_path
from xpubench.results import store

CONFIG = """
workload = ["selftest", "matmul"]
backend = ["numpy"]
size = [32, 48]
time_budget = 0.1
processes = 2
selftest = ["ok", {behaviour = "sleep", seconds = 3.0}]
"""


def xpubench_run_process(tmp_path, *args, **kw):
    """`xpubench run ARGS` in a process of its own, planning for the machine detected once per test run
    (test_distributed.xpubench_run): the kill and the resume are this test's subject, not detection."""
    return subprocess.Popen([*xpubench_run(tmp_path), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)


def workers_of(parent_pid: int) -> list[int]:
    """Worker processes started by ``parent_pid`` (they carry its pid in their environment)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and f"XPUBENCH_PARENT_PID={parent_pid}".encode() in (
                    proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_killed_run_resumes_every_case_exactly_once(tmp_path, capsys, detected_once):
    """The killed run is a real process; the resumes run the CLI in this process (their cases still in worker
    processes); both on the machine detected once per test run."""
    config, out = tmp_path / "sweep.toml", tmp_path / "r.jsonl"
    config.write_text(CONFIG)
    run = xpubench_run_process(tmp_path, "--config", str(config), "-o", str(out), "--no-progress", "--timeout", "60")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (out.exists() and out.read_text().count("\n") >= 1):
            assert run.poll() is None, run.communicate()
            time.sleep(0.05)
        time.sleep(0.2)  # let a worker start on the next case (the 3 s sleep)
        orphans = workers_of(run.pid)
        assert orphans, "expected a worker running the next case"
        os.kill(run.pid, signal.SIGKILL)  # the parent only: its worker is in a session of its own
        run.wait(timeout=10)
        # the orphan (sleeping 3 s) notices its parent died and kills itself well before it would end
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in orphans):
            time.sleep(0.1)
        alive = [p for p in orphans if Path(f"/proc/{p}").exists()
                 and Path(f"/proc/{p}/stat").read_text().split()[2] != "Z"]
        assert not alive, "orphaned worker still running"
    finally:
        for pid in [run.pid, *workers_of(run.pid)]:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    plan = [c["run_id"] for c in json.loads(plan_path(out).read_text())["cases"]]
    planned = [(run_id, p) for p in (0, 1) for run_id in plan]   # round by round
    before = [(r.case["run_id"], r.process) for r in store.load_file(out).runs]
    assert 1 <= len(before) < len(plan) and before == planned[:len(before)]
    with open(out, "a") as fh:  # a record torn by the kill
        fh.write('{"schema_version": 1, "case": {"run_id": "')

    capsys.readouterr()
    code = cli.main(["run", "--resume", str(out), "--no-progress"])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    assert "dropped an incomplete last line" in stdout + stderr
    assert f"resuming: {len(before)} of {len(planned)} worker processes already done" in stdout
    final = store.load_file(out)
    assert final.warnings == []
    ids = [(r.case["run_id"], r.process) for r in final.runs]
    assert collections.Counter(ids) == collections.Counter(planned)  # every process exactly once
    assert ids[: len(before)] == before  # what was written before the kill is untouched
    assert [r.case.run_id for r in final.results] == plan and all(len(r.runs) == 2 for r in final.results)
    assert all(r.status == "ok" for r in final.runs)

    again = cli.main(["run", "--resume", str(out), "--no-progress"])  # nothing left: no new record
    assert again == 0 and len(store.load_file(out).runs) == len(planned)


def test_second_run_on_the_same_file_is_refused(tmp_path):
    from xpubench.errors import UserError
    from xpubench.launch.runfile import held

    out = tmp_path / "r.jsonl"
    with held(out, create=True), pytest.raises(UserError, match="another xpubench run"), held(out, create=False):
        pass
