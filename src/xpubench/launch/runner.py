"""Runs a list of cases, each in several worker processes of its own (interleaved with the other cases),
and appends each process's result as soon as it exists.

A crash (signal), a host OOM (SIGKILL from the kernel), a timeout or an exception in one case becomes
that case's result; the sweep goes on. After an OOM at batch size B, larger batch sizes of the same
workload/backend/device/precision are recorded as skipped, never silently shrunk.

Cases that share a server (serve points: ``hosts``, serve/host.py) run as a group around it: it is opened
before the group's first process that is due and closed after its last, each worker handed where it is. A
server that does not start is each of its points' failure (or, ``hosts.fatal``, the command's one line); a
server that exits during a point is that point's failure, and its remaining points are left for --resume. A
worker of a mode that keeps what a stop cut (``Mode.keeps_cut``: a serving point's finished requests) hands
its outcome over when passed the stop (supervise.py, where one worker process is started, waited for and
read), and it is recorded before the stop goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from xpubench.case import Case
from xpubench.devices.device import Device, is_accelerator
from xpubench.errors import UserError
from xpubench.harness.target import process_case
from xpubench.launch.budget import Budget
from xpubench.launch.groups import groups
from xpubench.launch.launchers import active
from xpubench.launch.supervise import run_one
from xpubench.legible.units import utc_now
from xpubench.results import machine, store
from xpubench.results.schema import Run, finite

DEFAULT_TIMEOUT_S = 3600.0


def _device_of(text: str) -> Device | None:
    """The device of an id or placement ("cuda:1", "gpu:2..5 (4 devices)": its first device), or None."""
    head = text.strip().split()[0] if text.strip() else ""
    try:
        return Device.parse(head.split("..")[0])
    except ValueError:
        return None


def placement_problem(case: Case, placement: str | None) -> str | None:
    """A message when the work ran on another device than the one asked for (another kind, or another
    device of the same kind: gpu:1 for gpu:0), else None."""
    if not placement or _device_of(placement) == _device_of(case.device):
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
    budget: Budget | None = None,
    on_cut: Callable[[Case, int], None] | None = None,
    refuse: Callable[[Case], str | None] | None = None,
    hosts: Any = None,
    on_warning: Callable[[str], None] | None = None,
) -> list[Run]:
    """Run every case in ``processes`` worker processes (``schedule`` order); each process's Run is
    appended to ``out_path`` (if given) the moment it is known. Returns the runs of this call. (The
    keywords are ``Sweep``'s, which does the work.)

    ``earlier`` are runs already in the file (``--resume``): those processes are not run again, and
    their OOMs still skip larger batches. A case whose process did not end ok runs no further processes
    (a crash or a timeout would only repeat; its runs so far are kept). If appending fails (disk full),
    the runs of this call not yet in the file are saved next to it (or in the temp folder) and
    AppendError says where; nothing that ran is lost.

    In a run over several processes (launch/launchers/) this is process 0's sweep: it decides for all
    (the budget, an OOM, a failure), and each worker it starts is told to the others first, which start
    the same worker (launch/follower.py).

    With a ``budget`` (launch/budget.py) the cases run in its order, a case whose first process does
    not fit in the time left is recorded as skipped with the reason, a further process that does not fit
    is not started (``on_cut``), and each worker's timeout is capped by the time left.

    ``refuse(case)`` is the plan's reason a case can't run here (plan/fit.py: it can't fit its device's
    memory): such a case is recorded as skipped with it, no worker started, no budget spent.

    ``hosts`` (serve/host.py ``Hosts``) opens the server the serve cases of a group share (the module
    docstring); ``on_warning`` hears that a server exited mid-sweep."""
    sweep = Sweep(out_path, fingerprint=fingerprint, processes=processes, timeout_s=timeout_s,
                  memory_limit_bytes=memory_limit_bytes, budget=budget, refuse=refuse,
                  on_start=on_start, on_result=on_result, on_cut=on_cut, hosts=hosts, on_warning=on_warning)
    return sweep.run(cases, earlier)


@dataclasses.dataclass
class Sweep:
    """One pass over a plan's (case, process) pairs, in named steps: ``group`` (the cases that share a
    server, around it), ``due`` (not yet run, not stopped), ``verdict`` (refused by the plan, over the budget,
    larger than a batch that ran out of memory: recorded without a worker), ``measure`` (a worker), ``judge``
    (a placement on another device is an error; an OOM or a failure stops what follows), ``record``
    (appended at once)."""

    out_path: Path | None
    fingerprint: dict
    processes: int = 1
    timeout_s: float = DEFAULT_TIMEOUT_S
    memory_limit_bytes: int | None = None
    budget: Budget | None = None
    refuse: Callable[[Case], str | None] | None = None
    on_start: Callable[[Case, int], None] | None = None
    on_result: Callable[[Run], None] | None = None
    on_cut: Callable[[Case, int], None] | None = None
    hosts: Any = None                   # serve/host.py Hosts: the servers serve cases share (None: no serve case)
    on_warning: Callable[[str], None] | None = None
    oom_at: dict[tuple, int] = dataclasses.field(default_factory=dict)    # OOM group -> smallest batch that ran out
    done: set[tuple[str, int]] = dataclasses.field(default_factory=set)   # (run_id, process) already in the file
    stopped: set[str] = dataclasses.field(default_factory=set)            # run_ids that start no more processes

    def run(self, cases: Iterable[Case], earlier: Iterable[Run] = ()) -> list[Run]:
        for r in earlier:
            self.done.add((r.case.get("run_id"), r.process))
            if r.status != "ok":
                self.stopped.add(r.case.get("run_id"))
            _note_oom(self.oom_at, Case.from_dict(r.case), r.status)
        runs: list[Run] = []
        for group in groups(list(cases), self.budget, self.hosts):
            runs += self.group(group)
        return runs

    def group(self, cases: list[Case]) -> list[Run]:
        """The due processes of ``cases`` (schedule order); cases that share a server, around it."""
        pairs = [(c, p) for c, p in schedule(cases, self.processes) if self.due(c, p)]
        if not pairs or self.hosts is None or self.hosts.key(cases[0]) is None:
            return self.pairs(pairs)
        with contextlib.ExitStack() as stack:
            try:
                environment, gone = stack.enter_context(self.hosts.opened(cases[0]))
            except UserError as exc:   # a server that does not start: each of its points' failure
                if self.hosts.fatal:
                    raise
                return self.pairs(pairs, failed=str(exc))
            return self.pairs(pairs, environment, gone)

    def pairs(self, pairs: list[tuple[Case, int]], environment: dict[str, str] | None = None,
              gone: Callable[[], str | None] | None = None, failed: str | None = None) -> list[Run]:
        """Each (case, process) in turn (``failed``: what each case's first process records instead of
        running; ``gone()``: why their server exited, asked after each: it ends the pairs)."""
        runs: list[Run] = []
        for i, (case, process) in enumerate(pairs):
            if not self.due(case, process):
                continue
            skipped = {"status": "error", "message": failed} if failed else self.verdict(case, process)
            if skipped is CUT:
                if self.on_cut:
                    self.on_cut(case, process)
                continue
            if self.on_start:
                self.on_start(case, process)
            started, before = utc_now(), machine.snapshot()
            try:
                outcome, wall = (skipped, 0.0) if skipped else self.measure(case, process, environment)
            except KeyboardInterrupt as exc:   # a worker that keeps what the stop cut: recorded, then the stop
                if getattr(exc, "kept", None):
                    runs.append(self.record_run(case, process, *exc.kept, started, before))
                raise
            exited = gone() if gone else None
            if exited:   # the server ended during this point: its failure; the points after it wait for --resume
                outcome = {**outcome, "status": "error",
                           "message": "; ".join(m for m in (exited, outcome.get("message")) if m)}
            runs.append(self.record_run(case, process, outcome, wall, started, before))
            if exited:
                left = sum(1 for c, p in pairs[i + 1:] if self.due(c, p))
                if self.on_warning and left:
                    self.on_warning(f"{exited}: {left} point process(es) after it were not run (--resume runs "
                                    "them against a fresh start of the server)")
                break
        return runs

    def record_run(self, case: Case, process: int, outcome: dict, wall: float, started: str, before) -> Run:
        """The process's Run, judged (its placement; what an OOM or a failure stops) and recorded at once."""
        state = machine.state(before, machine.snapshot())
        self.judge(case, outcome)
        run = Run(
            case=case.as_dict(), status=outcome["status"], message=str(outcome.get("message") or ""),
            metrics=finite(outcome.get("metrics") or {}), samples=finite(outcome.get("samples") or {}),
            series=finite(outcome.get("series") or {}),
            artifacts=finite(outcome.get("artifacts") or {}), placement=outcome.get("placement"),
            fingerprint=self.fingerprint, started_at=started, duration_s=round(wall, 3),
            process=process, processes=self.processes, machine=state,
        )
        self.record(run)
        return run

    def due(self, case: Case, process: int) -> bool:
        """Whether this process is still to run: not in the file, its case not stopped."""
        return (case.run_id, process) not in self.done and case.run_id not in self.stopped

    def verdict(self, case: Case, process: int) -> dict | object | None:
        """What the plan and the run so far decide before any worker: a skipped outcome (larger than a
        batch that ran out of memory, refused by the plan, over the budget at its first process), ``CUT``
        (a further process the budget has no time for), or None: measure it."""
        refused = self.refuse(case) if self.refuse and process == 0 else None
        over = self.budget.admit(case, process) if self.budget and not refused else None
        if over and process > 0:
            return CUT
        group = _oom_group(case)
        if case.batch_size and group in self.oom_at and case.batch_size > self.oom_at[group]:
            return {"status": "skipped",
                    "message": f"larger than batch size {self.oom_at[group]}, which ran out of memory"}
        if refused or over:
            return {"status": "skipped", "message": refused or over}
        return None

    def measure(self, case: Case, process: int, environment: dict[str, str] | None = None) -> tuple[dict, float]:
        """One worker (its address space capped on a CPU, its timeout by the budget)."""
        limit = None if is_accelerator(case.device) else self.memory_limit_bytes  # CPU cases only (worker.py)
        return _run_within(self.budget, case, self.timeout_s, limit, process, environment)

    def judge(self, case: Case, outcome: dict) -> None:
        """Never a silent fallback: work that ran on another device than asked is an error (its numbers
        kept); an OOM skips larger batches, any failure the case's further processes."""
        _note_oom(self.oom_at, case, outcome["status"])
        if outcome["status"] == "ok":
            problem = placement_problem(case, outcome.get("placement"))
            if problem:
                outcome.update(status="error", message=problem)
        if outcome["status"] != "ok":
            self.stopped.add(case.run_id)

    def record(self, run: Run) -> None:
        """Appended to the results file the moment it exists, then told to the progress hook."""
        if self.out_path is not None:
            _append_or_save(self.out_path, run)
        if self.on_result:
            self.on_result(run)


CUT = object()   # Sweep.verdict: a further process the budget has no time for (not recorded)


def _run_within(budget: Budget | None, case: Case, timeout_s: float, limit: int | None,
                process: int = 0, environment: dict[str, str] | None = None) -> tuple[dict, float]:
    """run_one, its timeout capped by the budget's time left, told first to the run's other processes (if
    any); the budget re-plans from its wall time."""
    capped = budget.timeout(timeout_s) if budget else timeout_s
    ran = process_case(case, process)   # a case with a quality target: each process trains with a seed of its own
    active().tell({"case": ran.as_dict(), "process": process, "timeout_s": capped, "memory_limit_bytes": limit})
    outcome, wall = run_one(ran, timeout_s=capped, memory_limit_bytes=limit, process=process, environment=environment)
    if budget:
        budget.record(case, wall)
        if outcome["status"] == "timeout" and capped < timeout_s:
            outcome["message"] = f"{outcome.get('message')} (the run's {budget.total_s:g} s budget was spent)"
    return outcome, wall


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
