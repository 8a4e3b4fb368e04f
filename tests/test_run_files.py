"""The files of a run (runfile.py): one writer per results file, default names that never collide, and
a resume that works from any folder, says which model files it imports and refuses one that changed;
a case that failed on bad input is run again (issue 27, items 2, 5 and 6)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import this_machine
from test_distributed import xpubench_run

from xpubench import api, cli
from xpubench.launch import runfile
from xpubench.results import store

MODEL = """import torch
from torch import nn


def build():
    torch.manual_seed(0)
    return {"model": nn.Linear(8, 2), "input_shape": (8,), "task": "classes:2"}
"""
SLEEPY = 'selftest = [{behaviour = "sleep", seconds = 1.0}]\nbackend = ["numpy"]\nprocesses = 1\n'


@pytest.fixture
def machine(monkeypatch):
    """This machine's environment, detected once per test run (conftest.this_machine)."""
    env = this_machine()
    monkeypatch.setattr("xpubench.api.detect_environment", lambda **_: env)
    return env


def run_cli(capsys, *argv) -> tuple[int, str, list[str]]:
    capsys.readouterr()
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, [line for line in err.splitlines() if line.strip()]


# ---- 2. one writer per file ------------------------------------------------------------------------------

def test_a_second_run_on_a_held_file_is_refused_and_touches_nothing(tmp_path, capsys, machine):
    out = tmp_path / "r.jsonl"
    with runfile.held(out, create=True):
        code, _, err = run_cli(capsys, "run", "--selftest", "ok", "-b", "numpy", "--no-progress", "-o", out)
        assert code == 2 and err == [(f"xpubench: error: another xpubench run is writing {out}: wait for it to "
                                     "finish, or choose another --output")]
        assert not runfile.plan_path(out).exists() and out.read_bytes() == b""
        code, _, err = run_cli(capsys, "run", "--resume", out, "--no-progress")
        assert code == 2 and "another xpubench run is writing" in err[0]


def test_the_lock_is_on_the_results_file_not_the_replaced_plan(tmp_path):
    out = tmp_path / "r.jsonl"
    with runfile.held(out, create=True):
        runfile.write_plan(out, [], {})          # os.replace: a new inode for the plan
        runfile.write_plan(out, [], {})
        with pytest.raises(api.UserError, match="another xpubench run is writing"), runfile.held(out, create=False):
            pass


def test_default_names_never_collide(tmp_path, monkeypatch):
    first = runfile.default_output(tmp_path)
    first.write_text("")
    second = runfile.default_output(tmp_path)           # same second, same process: the next free name
    assert second != first and second.name.endswith("-2.jsonl")
    monkeypatch.setattr(os, "getpid", lambda: 999999)   # another process, same second: its own name
    assert "-999999" in runfile.default_output(tmp_path).name


@pytest.mark.slow
def test_two_runs_started_together_on_one_output(tmp_path):
    """Two `xpubench run -o r.jsonl` at once: one is refused in one line, the file holds the other's results
    only, and the plan is the survivor's (before the lock, the second overwrote the first's plan).
    The first run is stopped (SIGSTOP) from the moment its plan exists until the second has ended, so
    the two overlap however slowly either starts, and the first's case need not sleep long. Both plan for the
    machine detected once per test run (test_distributed.xpubench_run): the test is about their files."""
    out, config = tmp_path / "r.jsonl", tmp_path / "sleepy.toml"
    config.write_text(SLEEPY)
    cmd = [*xpubench_run(tmp_path), "--no-progress", "-o", str(out)]
    first = subprocess.Popen([*cmd, "--config", str(config)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not runfile.plan_path(out).exists() and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.05)
    assert runfile.plan_path(out).exists(), first.communicate(timeout=300)
    os.kill(first.pid, signal.SIGSTOP)   # it holds the lock (taken before the plan is written) while stopped
    try:
        second = subprocess.run([*cmd, "--selftest", "ok,raise", "-b", "numpy"], capture_output=True, text=True,
                                timeout=300, check=False)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert second.returncode == 2 and "Traceback" not in second.stderr
    assert second.stderr.strip().splitlines() == [(f"xpubench: error: another xpubench run is writing {out}: wait "
                                                  "for it to finish, or choose another --output")]
    loaded = store.load_file(out)
    assert [r.case.options["behaviour"] for r in loaded.results] == ["sleep"] and not loaded.warnings
    plan = json.loads(runfile.plan_path(out).read_text())["cases"]
    assert [c["run_id"] for c in plan] == [r.case.run_id for r in loaded.results]


@pytest.mark.slow
def test_two_runs_started_in_the_same_second_write_two_files(tmp_path):
    """Two `xpubench run` processes, planning for the machine detected once per test run."""
    cmd = [*xpubench_run(tmp_path), "--selftest", "ok", "-b", "numpy", "--processes", "1", "--no-progress"]
    runs = [subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    for r in runs:
        _, err = r.communicate(timeout=300)
        assert r.returncode == 0, err
    files = sorted(tmp_path.glob("xpubench-*.jsonl"))
    assert len(files) == 2 and all(len(store.load_file(f).runs) == 1 for f in files)


# ---- 5 and 6. resume from anywhere; the model files it imports ------------------------------------------

def _planned_model_run(folder: Path, machine: dict, monkeypatch) -> Path:
    """A run of folder/model.py planned from inside ``folder`` (the reference as a user types it) whose
    case has not run yet: what an interrupt before the first result leaves."""
    (folder / "model.py").write_text(MODEL)
    monkeypatch.chdir(folder)
    planned = api.plan(environment=machine, model="model.py:build", backends=["torch"], devices=["cpu"],
                       precisions=["fp32"], batch_sizes=[4], epochs=1, steps=1, train_samples=8, eval_samples=4)
    out = folder / "r.jsonl"
    out.touch()
    runfile.write_plan(out, planned.cases, {"timeout_s": 600.0, "processes": 1})
    return out


def test_the_plan_keeps_absolute_paths_and_the_model_digest(tmp_path, monkeypatch, machine):
    import hashlib

    out = _planned_model_run(tmp_path, machine, monkeypatch)
    [case], _ = runfile.read_plan(out)
    assert case.options["model"] == "model.py:build"       # as typed: the key a report shows
    assert case.options["model_file"] == str(tmp_path.resolve() / "model.py")
    assert case.options["model_sha256"] == hashlib.sha256(MODEL.encode()).hexdigest()
    planned = api.plan(environment=machine, workloads=["mnist_cnn"], backends=["torch"], devices=["cpu"],
                       data="real", data_dir=".", precisions=["fp32"], batch_sizes=[4])
    assert {c.data_dir for c in planned.cases} == {str(tmp_path.resolve())}


def test_a_resume_refuses_a_model_file_that_changed(tmp_path, monkeypatch, capsys, machine):
    out = _planned_model_run(tmp_path, machine, monkeypatch)
    (tmp_path / "model.py").write_text(MODEL + "\n# edited\n")
    monkeypatch.chdir("/")
    code, _, err = run_cli(capsys, "run", "--resume", out, "--no-progress")
    assert code == 2 and len(err) == 1
    assert f"model file {tmp_path.resolve()}/model.py changed since the run was planned" in err[0]
    assert "--allow-changed-model" in err[0] and out.read_bytes() == b""


def test_a_resume_refuses_a_model_file_that_is_gone(tmp_path, monkeypatch, capsys, machine):
    out = _planned_model_run(tmp_path, machine, monkeypatch)
    (tmp_path / "model.py").unlink()
    code, _, err = run_cli(capsys, "run", "--resume", out, "--no-progress")
    assert code == 2 and len(err) == 1 and "model file" in err[0] and "does not exist" in err[0]


def test_allow_changed_model_goes_with_resume_only(capsys):
    code, _, err = run_cli(capsys, "run", "-w", "matmul", "--allow-changed-model")
    assert code == 2 and "--allow-changed-model goes with --resume" in err[0]


@pytest.mark.slow
def test_resume_from_another_folder_finishes_the_model_case(tmp_path, monkeypatch, capsys, machine):
    here, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    out = _planned_model_run(here, machine, monkeypatch)
    monkeypatch.chdir(elsewhere)           # the CLI in this process (the case runs in its worker), elsewhere
    code, stdout, err = run_cli(capsys, "run", "--resume", out, "--no-progress")
    assert code == 0, stdout + "\n".join(err)
    said = " ".join((stdout + " ".join(err)).split())
    assert f"--resume imports model file(s): {here.resolve()}/model.py (sha256 " in said and "as planned" in said
    [result] = store.load_file(out).results
    assert result.status == "ok", result.message
    assert result.key.endswith("/model.py") and result.metrics["model_file"] == str(here.resolve() / "model.py")


# ---- a case that failed on bad input runs again on --resume ---------------------------------------------

@pytest.mark.slow
def test_a_case_that_failed_on_bad_input_is_run_again(tmp_path, capsys, machine):
    out = tmp_path / "r.jsonl"
    code, _, err = run_cli(capsys, "run", "--selftest", "ok,baddata", "-b", "numpy", "--processes", "1",
                           "--no-progress", "-o", out)
    assert code == 2 and "data file is corrupt (deliberate)" in err[0]
    code, out_text, _ = run_cli(capsys, "run", "--resume", out, "--no-progress")
    assert "running again 1 case(s) that failed on bad input" in " ".join(out_text.split())
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["case"]["options"]["behaviour"] for r in lines] == ["ok", "baddata", "baddata"]
    loaded = store.load_file(out)
    assert len(loaded.runs) == 2 and not loaded.warnings   # the retry replaces the failure, said nowhere
    assert [len(r.runs) for r in loaded.results] == [1, 1]
