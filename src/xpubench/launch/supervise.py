"""One worker process, from the parent's side: started by the run's launcher (launch/launchers/: spawned
or forked) with its case in a private temporary folder, waited for within its timeout, killed with its
whole process group, and its RESULT file read into an outcome, or the exit code and stderr's tail made
one (harness/failures.py). A worker of a mode that keeps what a stop cut (``Mode.keeps_cut``: a serving
point's finished requests) is passed the stop and given ``STOP_GRACE_S`` to hand its outcome over.
The sweep over many cases and processes is runner.py's; a process other than 0 starts the workers it is
told to (follower.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from xpubench import envnames
from xpubench.case import Case
from xpubench.devices.device import is_accelerator
from xpubench.errors import stop_signal, stops_held
from xpubench.harness import failures
from xpubench.launch import forkserver
from xpubench.launch.launchers import active
from xpubench.results.modes import mode_of
from xpubench.results.outcome import Outcome

STOP_GRACE_S = 10.0    # a worker that keeps what a stop cut: the time it has to hand its outcome over


def run_one(case: Case, *, timeout_s: float, memory_limit_bytes: int | None = None,
            workdir: Path | None = None, process: int = 0, environment: dict[str, str] | None = None
            ) -> tuple[dict, float]:
    """Run one case in a fresh worker process (the case's ``process``-th), started by the run's launcher
    (launch/launchers/: spawned or forked, handed this process's place in the run); returns (outcome dict,
    wall seconds).

    The worker only writes its own RESULT file in a private temporary folder; only this (parent)
    process appends to the results file, so a worker orphaned by a killed parent can never add a
    record (and it kills itself when it notices, see worker.watch_parent). ``environment``: variables the
    worker is handed besides (where a serve case's server is). A stop while it runs ends it; a worker of a
    mode that keeps what a stop cut is passed the stop first, and what it handed over rides on the stop
    (its ``kept``: (outcome dict, wall seconds)) for the sweep to record."""
    launcher = active()
    with tempfile.TemporaryDirectory(prefix="xpubench-", dir=workdir) as tmp:
        tmpdir = Path(tmp)
        case_path, result_path, err_path = tmpdir / "case.json", tmpdir / "result.json", tmpdir / "stderr.txt"
        case_path.write_text(json.dumps(case.as_dict()))
        env = dict(os.environ, PYTHONUNBUFFERED="1", **(environment or {}), **{envnames.PARENT_PID: str(os.getpid())})
        env.pop(envnames.MEMORY_LIMIT, None)
        if memory_limit_bytes:
            env[envnames.MEMORY_LIMIT] = str(int(memory_limit_bytes))  # the worker sets RLIMIT_AS first thing
        launcher.worker_environment(env)
        start, proc, how = time.perf_counter(), None, forkserver.method(is_accelerator(case.device))
        outcome = None
        with open(err_path, "wb") as err:
            try:
                proc, how = launcher.start_worker(case, how, [str(case_path), str(result_path)], env, err, timeout_s,
                                                  process)
                code = proc.wait(timeout=max(0.0, timeout_s - (time.perf_counter() - start)))
            except subprocess.TimeoutExpired:
                outcome = {"status": "timeout", "message": f"no result after {timeout_s:g} s: killed"}
            except forkserver.ServerGone as exc:   # its worker would end itself (worker.watch_parent): killed below
                outcome = {"status": "error", "message": str(exc)}
            except BaseException as exc:
                kept = _kept(proc, result_path, exc, start) if _keeps_cut(case) else None
                _kill_group(proc)
                if kept is not None:
                    exc.kept = kept   # the sweep records it before the stop goes on
                raise
            _kill_group(proc)  # the timed-out worker, or children the worker left behind (e.g. DDP ranks)
        wall = time.perf_counter() - start
        if outcome is None:
            outcome = _outcome(code, result_path, failures.stderr_tail(err_path), memory_limit_bytes, case.device)
        outcome["metrics"] = {**(outcome.get("metrics") or {}), "launch": how}
        if launcher.world.multi:
            outcome["metrics"]["launcher"] = launcher.name
        return outcome, wall


def _keeps_cut(case: Case) -> bool:
    mode = mode_of(case.mode)
    return bool(mode and mode.keeps_cut)


def _kept(proc, result_path: Path, stop: BaseException, start: float) -> tuple[dict, float] | None:
    """What a worker that keeps what a stop cut hands over when passed the stop (``stop``: Ctrl-C, SIGTERM or
    SIGHUP, sent to it as it came), within STOP_GRACE_S; None when there is nothing (another stop meanwhile
    gives up the wait)."""
    if proc is None or not isinstance(stop, KeyboardInterrupt):
        return None
    try:
        os.killpg(proc.pid, stop_signal(stop))
        code = proc.wait(timeout=STOP_GRACE_S)
    except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired, forkserver.ServerGone, KeyboardInterrupt):
        return None
    if not result_path.exists():
        return None
    return _outcome(code, result_path, "", None), time.perf_counter() - start


def _outcome(code: int, result_path: Path, tail: str, memory_limit_bytes: int | None,
             device: str = "cpu") -> dict:
    """What a finished worker left: its RESULT file, else the exit code and stderr tell the story
    (failures.dead_worker)."""
    if result_path.exists():
        try:
            return dataclasses.asdict(Outcome.from_dict(json.loads(result_path.read_text())))
        except (OSError, ValueError) as exc:
            return {"status": "error", "message": f"the worker's result is unreadable ({exc})"}
    return failures.dead_worker(code, tail, memory_limit_bytes, device)


def _kill_group(proc: subprocess.Popen | forkserver.Forked | None) -> None:
    """The worker's whole process group killed and waited for, whole: a second Ctrl-C, SIGTERM or SIGHUP
    waits for it (errors.stops_held)."""
    if proc is None:   # a fork server's imports outlasted the timeout: it was ended (forkserver.py)
        return
    with stops_held():
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=10)
        except (subprocess.TimeoutExpired, forkserver.ServerGone):
            pass
