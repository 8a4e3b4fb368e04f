"""Runs a list of cases, each in its own worker process, and appends each result as soon as it exists.

A crash (signal), a host OOM (SIGKILL from the kernel), a timeout or an exception in one case becomes
that case's result; the sweep goes on. After an OOM at batch size B, larger batch sizes of the same
workload/backend/device/precision are recorded as skipped, never silently shrunk.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from xpubench.harness.metrics import add_peak_metrics
from xpubench.plan import Case
from xpubench.results import store
from xpubench.results.fingerprint import utc_now
from xpubench.results.schema import Result

DEFAULT_TIMEOUT_S = 3600.0


def _limit_memory(limit_bytes: int | None) -> Callable[[], None]:
    def preexec() -> None:
        os.setsid()  # own process group: a timeout kills the worker and everything it started
        if limit_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    return preexec


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def _stderr_tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])[-600:]


def run_one(case: Case, *, timeout_s: float, memory_limit_bytes: int | None = None,
            workdir: Path | None = None) -> tuple[dict, float]:
    """Run one case in a fresh worker process; returns (outcome dict, wall seconds)."""
    with tempfile.TemporaryDirectory(prefix="xpubench-", dir=workdir) as tmp:
        tmpdir = Path(tmp)
        case_path, result_path, err_path = tmpdir / "case.json", tmpdir / "result.json", tmpdir / "stderr.txt"
        case_path.write_text(json.dumps(case.as_dict()))
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        start = time.perf_counter()
        with open(err_path, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "xpubench.harness.worker", str(case_path), str(result_path)],
                stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=env,
                preexec_fn=_limit_memory(memory_limit_bytes),
            )
            try:
                code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                wall = time.perf_counter() - start
                return {"status": "timeout", "message": f"no result after {timeout_s:g} s: killed"}, wall
            except BaseException:
                _kill_group(proc)
                raise
        wall = time.perf_counter() - start
        _kill_group(proc)  # children the worker left behind (e.g. DDP ranks)
        if result_path.exists():
            return json.loads(result_path.read_text()), wall
        tail = _stderr_tail(err_path)
        if code in (-signal.SIGKILL, 137):
            msg = "killed by SIGKILL: the host likely ran out of memory"
            return {"status": "oom", "message": msg + (f" ({tail})" if tail else "")}, wall
        if code < 0:
            return {"status": "crash", "message": f"worker died from {_signal_name(-code)}"
                    + (f": {tail}" if tail else "")}, wall
        if "MemoryError" in tail:
            return {"status": "oom", "message": f"host memory exhausted: {tail}"}, wall
        return {"status": "crash", "message": f"worker exited with code {code} and no result"
                + (f": {tail}" if tail else "")}, wall


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _oom_group(case: Case) -> tuple:
    return (case.workload, case.backend, case.device, case.mode, case.precision, case.devices)


def run_cases(
    cases: Iterable[Case],
    out_path: Path | None,
    *,
    fingerprint: dict,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_limit_bytes: int | None = None,
    on_start: Callable[[Case], None] | None = None,
    on_result: Callable[[Result], None] | None = None,
) -> list[Result]:
    """Run every case; each result is appended to ``out_path`` (if given) the moment it is known."""
    results: list[Result] = []
    oom_at: dict[tuple, int] = {}
    for case in cases:
        if on_start:
            on_start(case)
        started = utc_now()
        group = _oom_group(case)
        if case.batch_size and group in oom_at and case.batch_size > oom_at[group]:
            outcome, wall = {"status": "skipped", "message": (
                f"larger than batch size {oom_at[group]}, which ran out of memory")}, 0.0
        else:
            outcome, wall = run_one(case, timeout_s=timeout_s, memory_limit_bytes=memory_limit_bytes)
        if outcome["status"] == "oom" and case.batch_size:
            oom_at[group] = min(case.batch_size, oom_at.get(group, case.batch_size))
        if outcome["status"] == "ok":
            add_peak_metrics(outcome.setdefault("metrics", {}), case.as_dict(), fingerprint)
        result = Result(
            case=case.as_dict(), status=outcome["status"], message=outcome.get("message", ""),
            metrics=outcome.get("metrics", {}), samples=outcome.get("samples", {}),
            series=outcome.get("series", {}), placement=outcome.get("placement"),
            fingerprint=fingerprint, started_at=started, duration_s=round(wall, 3),
        )
        results.append(result)
        if out_path is not None:
            store.append(out_path, result)
        if on_result:
            on_result(result)
    return results
