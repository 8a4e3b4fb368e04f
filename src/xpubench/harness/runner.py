"""Runs a list of cases, each in several worker processes of its own (interleaved with the other cases),
and appends each process's result as soon as it exists.

A crash (signal), a host OOM (SIGKILL from the kernel), a timeout or an exception in one case becomes
that case's result; the sweep goes on. After an OOM at batch size B, larger batch sizes of the same
workload/backend/device/precision are recorded as skipped, never silently shrunk.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from xpubench.harness.metrics import add_peak_metrics
from xpubench.harness.worker import DEVICE_OOM_MARKERS, MEMORY_LIMIT_ENV, is_accelerator
from xpubench.plan import Case
from xpubench.results import machine, store
from xpubench.results.fingerprint import utc_now
from xpubench.results.schema import STATUSES, Run, finite

DEFAULT_TIMEOUT_S = 3600.0
DEVICE_ALIASES = {"cuda": "gpu", "rocm": "gpu", "hip": "gpu"}


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def _stderr_tail(path: Path, lines: int = 3) -> str:
    """The telling part of a dead worker's stderr: the first line naming a memory failure, else a
    thread that could not be created, else an error (stack dumps of native aborts come after it), else
    the last few lines."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - (256 << 10)))
            text = [t.strip() for t in fh.read().decode(errors="replace").splitlines() if t.strip()]
    except OSError:
        return ""
    for markers in (OOM_LINE_MARKERS, THREAD_OOM_MARKERS, ("Check failed", "what():", "Error", "error:", "Fatal", "FATAL")):
        telling = [t for t in text if any(m in t for m in markers)]
        if telling:
            return telling[0][:600]
    return " | ".join(text[-lines:])[-600:]


# a native abort that names an allocation failure (the allocator or the loader found no memory)
HOST_OOM_MARKERS = ("MemoryError", "bad_alloc", "failed to map segment", "Memory allocation",
                    "Cannot allocate memory", "cannot allocate memory", "out of memory")
# a thread that could not be created: no address space for its stack under --memory-limit, but also a
# process or thread limit (ulimit -u, cgroup pids.max); counted as memory only under a memory limit
THREAD_OOM_MARKERS = ("pthread_create", "Resource temporarily unavailable")
# the lines that name a memory failure, picked before a thread-creation failure or any other error line
OOM_LINE_MARKERS = (*HOST_OOM_MARKERS, "RESOURCE_EXHAUSTED", "hipErrorOutOfMemory", "cudaErrorMemoryAllocation",
                    "ALLOC_FAILED")


def run_one(case: Case, *, timeout_s: float, memory_limit_bytes: int | None = None,
            workdir: Path | None = None) -> tuple[dict, float]:
    """Run one case in a fresh worker process; returns (outcome dict, wall seconds).

    The worker only writes its own RESULT file in a private temporary folder; only this (parent)
    process appends to the results file, so a worker orphaned by a killed parent can never add a
    record (and it kills itself when it notices, see worker.watch_parent)."""
    with tempfile.TemporaryDirectory(prefix="xpubench-", dir=workdir) as tmp:
        tmpdir = Path(tmp)
        case_path, result_path, err_path = tmpdir / "case.json", tmpdir / "result.json", tmpdir / "stderr.txt"
        case_path.write_text(json.dumps(case.as_dict()))
        env = dict(os.environ, PYTHONUNBUFFERED="1", XPUBENCH_PARENT_PID=str(os.getpid()))
        env.pop(MEMORY_LIMIT_ENV, None)
        if memory_limit_bytes:
            env[MEMORY_LIMIT_ENV] = str(int(memory_limit_bytes))  # the worker sets RLIMIT_AS first thing
        start = time.perf_counter()
        with open(err_path, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "xpubench.harness.worker", str(case_path), str(result_path)],
                stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=env,
                start_new_session=True,  # own process group: a timeout kills the worker and its children
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
        return _outcome(code, result_path, _stderr_tail(err_path), memory_limit_bytes, case.device), wall


def _outcome(code: int, result_path: Path, tail: str, memory_limit_bytes: int | None,
             device: str = "cpu") -> dict:
    """What a finished worker left: its RESULT file, else the exit code and stderr tell the story.

    With no RESULT, out-of-memory is only what the evidence says: SIGKILL / exit 137 (the kernel's OOM
    killer) is host memory; an allocator's device phrase ("CUDA out of memory", "RESOURCE_EXHAUSTED",
    "hipErrorOutOfMemory", ...) or "out of memory" in a case on an accelerator is device memory; the
    host allocator's text is host memory; a thread that could not be created is host memory only
    under --memory-limit. Everything else is a crash."""
    detail = f": {tail}" if tail else ""
    if result_path.exists():
        try:
            outcome = json.loads(result_path.read_text())
            if not isinstance(outcome, dict) or outcome.get("status") not in STATUSES:
                raise ValueError(f"unknown status {outcome.get('status')!r}" if isinstance(outcome, dict)
                                 else "not an object")
            return outcome
        except (OSError, ValueError) as exc:
            return {"status": "error", "message": f"the worker's result is unreadable ({exc})"}
    limit = f" (--memory-limit {memory_limit_bytes / (1 << 20):g} MiB)" if memory_limit_bytes else ""
    if code in (-signal.SIGKILL, 137):
        return {"status": "oom", "message": "host out of memory: the worker was killed by SIGKILL "
                f"(the kernel's OOM killer, most likely){limit}{detail}"}
    kind = _oom_kind_of_tail(tail, device, memory_limit_bytes)
    if kind == "device":
        return {"status": "oom", "message": f"device out of memory{detail}"}
    if kind == "host":
        return {"status": "oom", "message": f"host out of memory{limit}{detail}"}
    if code < 0:
        return {"status": "crash", "message": f"worker died from {_signal_name(-code)}{detail}"}
    return {"status": "crash", "message": f"worker exited with code {code} and no result{detail}"}


def _oom_kind_of_tail(tail: str, device: str, memory_limit_bytes: int | None) -> str | None:
    """'device', 'host' or None (not an out-of-memory) for the telling line of a dead worker's stderr."""
    lower = tail.lower()
    if any(m in lower for m in DEVICE_OOM_MARKERS):
        return "device" if is_accelerator(device) else "host"
    if "out of memory" in lower and is_accelerator(device):
        return "device"
    if any(m in tail for m in HOST_OOM_MARKERS):
        return "host"
    if memory_limit_bytes and any(m in tail for m in THREAD_OOM_MARKERS):
        return "host"
    return None


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _kind(device: str) -> tuple[str, int]:
    """(kind, index) of a device id or placement: "cuda:1" -> ("gpu", 1), "cpu" -> ("cpu", 0),
    "gpu:2..5 (4 devices)" -> ("gpu", 2) (a multi-device placement starts at its first device)."""
    kind, _, rest = device.strip().lower().partition(":")
    kind = kind.split()[0] if kind.split() else ""
    digits = re.match(r"\d+", rest)
    return DEVICE_ALIASES.get(kind, kind), int(digits.group()) if digits else 0


def placement_problem(case: Case, placement: str | None) -> str | None:
    """A message when the work ran on another device than the one asked for (another kind, or another
    device of the same kind: gpu:1 for gpu:0), else None."""
    if not placement or _kind(placement) == _kind(case.device):
        return None
    return f"ran on {placement}, not on the requested {case.device}"


def _oom_group(case: Case) -> tuple:
    return (case.workload, case.backend, case.device, case.mode, case.precision, case.devices)


def schedule(cases: list[Case], processes: int) -> list[tuple[Case, int]]:
    """The order worker processes run in: round by round, every case once per round (process i of every
    case before process i + 1 of any), so a slow spell of the machine touches many cases a little
    rather than one case wholly."""
    return [(case, process) for process in range(processes) for case in cases]


def run_cases(
    cases: Iterable[Case],
    out_path: Path | None,
    *,
    fingerprint: dict,
    processes: int = 1,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_limit_bytes: int | None = None,
    on_start: Callable[[Case, int], None] | None = None,
    on_result: Callable[[Run], None] | None = None,
    earlier: Iterable[Run] = (),
) -> list[Run]:
    """Run every case in ``processes`` worker processes (``schedule`` order); each process's Run is
    appended to ``out_path`` (if given) the moment it is known. Returns the runs of this call.

    ``earlier`` are runs already in the file (``--resume``): those processes are not run again, and
    their OOMs still skip larger batches. A case whose process did not end ok runs no further processes
    (a crash or a timeout would only repeat; its runs so far are kept). If appending fails (disk full),
    the runs of this call not yet in the file are saved next to it (or in the temp folder) and
    AppendError says where; nothing that ran is lost."""
    runs: list[Run] = []
    oom_at: dict[tuple, int] = {}
    earlier = list(earlier)
    done = {(r.case.get("run_id"), r.process) for r in earlier}
    stopped = {r.case.get("run_id") for r in earlier if r.status != "ok"}
    for r in earlier:
        _note_oom(oom_at, Case.from_dict(r.case), r.status)
    for case, process in schedule(list(cases), processes):
        if (case.run_id, process) in done or case.run_id in stopped:
            continue
        if on_start:
            on_start(case, process)
        started = utc_now()
        group = _oom_group(case)
        before = machine.snapshot()
        if case.batch_size and group in oom_at and case.batch_size > oom_at[group]:
            outcome, wall = {"status": "skipped", "message": (
                f"larger than batch size {oom_at[group]}, which ran out of memory")}, 0.0
        else:
            limit = None if is_accelerator(case.device) else memory_limit_bytes  # CPU cases only (worker.py)
            outcome, wall = run_one(case, timeout_s=timeout_s, memory_limit_bytes=limit)
        state = machine.state(before, machine.snapshot())
        _note_oom(oom_at, case, outcome["status"])
        if outcome["status"] == "ok":
            problem = placement_problem(case, outcome.get("placement"))
            if problem:  # never a silent fallback: the numbers are kept, the status says what happened
                outcome.update(status="error", message=problem)
            else:
                add_peak_metrics(outcome.setdefault("metrics", {}), case.as_dict(), fingerprint)
        if outcome["status"] != "ok":
            stopped.add(case.run_id)
        run = Run(
            case=case.as_dict(), status=outcome["status"], message=str(outcome.get("message") or ""),
            metrics=finite(outcome.get("metrics") or {}), samples=finite(outcome.get("samples") or {}),
            series=finite(outcome.get("series") or {}),
            artifacts=finite(outcome.get("artifacts") or {}), placement=outcome.get("placement"),
            fingerprint=fingerprint, started_at=started, duration_s=round(wall, 3),
            process=process, processes=processes, machine=state,
        )
        runs.append(run)
        if out_path is not None:
            _append_or_save(out_path, run)
        if on_result:
            on_result(run)
    return runs


def _note_oom(oom_at: dict[tuple, int], case: Case, status: str) -> None:
    if status == "oom" and case.batch_size:
        group = _oom_group(case)
        oom_at[group] = min(case.batch_size, oom_at.get(group, case.batch_size))


def _append_or_save(out_path: Path, run: Run) -> None:
    """Append; on failure save this run elsewhere and stop the sweep with one line saying where.
    (Every earlier run of the sweep is already in the file.)"""
    try:
        store.append(out_path, run)
    except store.AppendError as exc:
        saved_to = store.save_fallback(out_path, [run])
        where = (f"the result of {run.key} is in {saved_to} (append it: cat {saved_to} >> {out_path})"
                 if saved_to else f"the result of {run.key} could not be saved anywhere")
        raise store.AppendError(f"{exc}; earlier results are intact; {where}; "
                                f"free space, then finish with --resume {out_path}") from None
