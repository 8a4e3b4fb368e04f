"""`xpubench run`'s exit codes (docs/bad-input.md, "Exit codes"; issue 26 item 5): 0 every case ok (or
skipped with its reason) and at least one measured; 1 some failed, some ok; 2 bad input; 3 no case ok;
130 an interrupt. `run ... && next_step` must stop after a total failure."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest
from test_distributed import xpubench_run

from xpubench import cli
from xpubench.cli.run import EXIT_BAD_INPUT, EXIT_NONE_OK, EXIT_OK, EXIT_SOME_FAILED, summarize_failures


def result(status: str, key: str = "k", error_type: str | None = None):
    return SimpleNamespace(status=status, key=key, message=f"{status} happened",
                           metrics={"error_type": error_type} if error_type else {})


@pytest.mark.parametrize("statuses,code", [
    (["ok"], EXIT_OK),
    (["ok", "skipped"], EXIT_OK),
    (["ok", "crash"], EXIT_SOME_FAILED),
    (["ok", "oom", "timeout", "error"], EXIT_SOME_FAILED),
    (["error"], EXIT_NONE_OK),
    (["crash", "skipped"], EXIT_NONE_OK),
    (["skipped", "skipped"], EXIT_NONE_OK),
    ([], EXIT_NONE_OK),
])
def test_the_exit_code_table(statuses, code, capsys):
    assert summarize_failures([result(s, f"case{i}") for i, s in enumerate(statuses)]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == (0 if code == EXIT_OK else 1)
    if code == EXIT_NONE_OK:
        assert err[0].startswith("xpubench: no case finished ok")


def test_bad_input_found_in_a_worker_is_2_and_says_the_case(capsys):
    code = summarize_failures([result("ok", "a"), result("error", "b", error_type="UserError")])
    assert code == EXIT_BAD_INPUT
    assert capsys.readouterr().err.strip() == "xpubench: error: b: error happened"


def test_an_interrupt_is_130(monkeypatch, capsys):
    def interrupted(args, console):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, "run", interrupted)
    assert cli.main(["run", "-w", "matmul"]) == 130
    assert "interrupted" in capsys.readouterr().err


def xpubench(tmp_path, *args):
    """`xpubench run ARGS` in a process of its own, planning for the machine detected once per test run
    (test_distributed.xpubench_run): the exit code is this test's subject, not detection."""
    return subprocess.run([*xpubench_run(tmp_path), *args, "--processes", "1", "--no-progress"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
def test_a_model_file_that_raises_on_import_is_bad_input_exit_2(tmp_path, monkeypatch, capfd, detected_once):
    """The user's file is the input (issue 31 item 8): its import error is the case's error of one line, and
    the run ends as bad input does, with the case recorded. In this process (cli.main's exit code is the
    process's, as test_some_failed_is_1_and_bad_input_is_2 shows through real processes), the machine detected
    once per test run; the case's worker is a real process, and capfd reads its stderr with ours."""
    (tmp_path / "broken.py").write_text('raise RuntimeError("broken on import")\n\n\ndef build():\n    return None\n')
    monkeypatch.chdir(tmp_path)
    code = cli.main(["run", "--model", "broken.py:build", "-b", "torch", "-p", "fp32", "-o", "r.jsonl",
                     "--processes", "1", "--no-progress"])
    out, err = capfd.readouterr()
    assert code == EXIT_BAD_INPUT, out + err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert "raised RuntimeError while being imported: broken on import" in err
    assert '"status": "error"' in (tmp_path / "r.jsonl").read_text()


@pytest.mark.slow
def test_some_failed_is_1_and_bad_input_is_2(tmp_path):
    some = xpubench(tmp_path, "--selftest", "ok,raise", "-b", "numpy", "-o", "some.jsonl")
    assert some.returncode == EXIT_SOME_FAILED, some.stderr
    assert "1 case(s) did not finish ok" in some.stderr and "Traceback" not in some.stderr
    bad = xpubench(tmp_path, "-w", "resnet9000")
    assert bad.returncode == EXIT_BAD_INPUT and bad.stderr.count("\n") == 1
    assert not list(tmp_path.glob("xpubench-*.jsonl"))   # nothing ran, nothing written
