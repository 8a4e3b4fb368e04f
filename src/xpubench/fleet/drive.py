"""`xpubench fleet`: check everything, lock DIR, hand each machine's run to its engine, follow them until
each has ended, then the cross-machine summary. Ctrl-C (SIGINT, SIGTERM) cancels the jobs this command
started (and only those) and keeps what arrived; ``--resume DIR`` starts again only the machines whose
plan is not finished, each with `run --resume` for its own cases; ``--collect DIR`` reads the logs of the
engines nothing here follows (kubernetes, skypilot)."""

from __future__ import annotations

import contextlib
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

from xpubench.errors import UserError
from xpubench.fleet import engines, file
from xpubench.fleet.engines import FINAL, SUBMITTED, WRITTEN, Job
from xpubench.fleet.folder import Folder
from xpubench.fleet.progress import DONE, Counter, Display, state, why
from xpubench.legible.plaintext import shown

POLL_S = 2.0
EXIT_OK, EXIT_SOME_FAILED, EXIT_NONE_OK, EXIT_INTERRUPTED = 0, 1, 3, 130


@dataclass
class Outcome:
    """How the fleet ended: each machine's (state, line) and the exit code."""

    states: dict[str, tuple[str, str]]
    code: int


def new(path: str, out: Path, *, run_module: str, submit: bool = False) -> Folder:
    """The fleet file read and checked, DIR checked: a Folder ready to drive (nothing written yet)."""
    fleet = file.read(path)
    folder = Folder(out, fleet, run_module, submit=submit)
    if out.exists() and not out.is_dir():
        raise UserError(f"-o {shown(out)} is a file: give a folder for the fleet's results")
    if folder.config.exists():
        raise UserError(f"{shown(out)} already holds a fleet ({folder.config.name}): --resume {shown(out)} finishes "
                        "it, or choose another -o")
    for m in fleet.machines:
        if folder.results(m.name).exists() and folder.results(m.name).stat().st_size:
            raise UserError(f"{shown(folder.results(m.name))} already holds results: choose another -o")
    check(folder, list(fleet.machines))
    return folder


def resumed(out: Path, *, run_module: str, submit: bool = False) -> tuple[Folder, list, list[str]]:
    """DIR's fleet: (the Folder, the machines to start again, a note per machine left as it is)."""
    config = out / "fleet.toml"
    if not config.exists():
        raise UserError(f"cannot resume {shown(out)}: no fleet.toml in it (written by `xpubench fleet FILE -o DIR`)")
    fleet = file.read(config)
    folder = Folder(out, fleet, run_module, submit=submit)
    counter, todo, notes = Counter(), [], []
    for m in fleet.machines:
        count = counter(folder.results(m.name))
        if count.complete:
            notes.append(f"{m.name}: done already ({count} cases)")
        elif not engines.get(m.engine).follows:
            notes.append(f"{m.name}: a {m.engine} machine's results come back with `xpubench fleet --collect "
                         f"{shown(out)}` (not submitted again)")
        else:
            if count.planned is not None:
                folder.resume.add(m.name)
            todo.append(m)
    check(folder, todo)
    return folder, todo, notes


def check(folder: Folder, machines: list) -> None:
    for name, group in _by_engine(machines).items():
        engines.get(name).check(group, folder)


def _by_engine(machines) -> dict[str, list]:
    groups: dict[str, list] = {}
    for m in machines:
        groups.setdefault(m.engine, []).append(m)
    return groups


def dry_run(folder: Folder, machines: list, console) -> int:
    for m in machines:
        if m.name in folder.resume:
            console.print(f"{m.name}: resumed (its cases left)", markup=False, highlight=False, soft_wrap=True)
    for name, group in _by_engine(machines).items():
        for line in engines.get(name).describe(group, folder):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"nothing submitted (--dry-run); the results would go to {shown(folder.path)}/<name>.jsonl",
                  markup=False, highlight=False, soft_wrap=True)
    return EXIT_OK


def drive(folder: Folder, machines: list, console, *, live: bool, first: bool) -> Outcome:
    """Lock DIR (a second fleet on it is refused), write the fleet file there (``first``), start every
    machine's run and follow them to the end (Ctrl-C: cancel them)."""
    from xpubench.launch.runfile import held
    from xpubench.results.store import write_atomically

    folder.path.mkdir(parents=True, exist_ok=True)
    with held(folder.lock, create=True, what="fleet"):
        if first:
            if folder.config.exists():   # another fleet wrote it between the check and the lock
                raise UserError(f"{shown(folder.path)} already holds a fleet: --resume {shown(folder.path)}")
            write_atomically(folder.config, folder.fleet.text.encode("utf-8"))
        with _interrupts() as stop:
            started = [(engines.get(name), engines.get(name).start(group, folder))
                       for name, group in _by_engine(machines).items()]
            _save(folder, machines, started)
            cancelled = _follow(folder, machines, started, console, live, stop)
        _save(folder, machines, started)
        return _outcome(folder, machines, started, cancelled)


@contextlib.contextmanager
def _interrupts():
    """SIGINT and SIGTERM set an event the loop reads (a submission is never cut in half), then raise no more."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    old = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _rows(folder: Folder, machines, started, counter: Counter, cancelled: bool = False) -> list:
    jobs = {j.name: j for _, js in started for j in js}
    return [(m.name, m.engine, state(jobs[m.name], counter(folder.results(m.name)), cancelled),
             counter(folder.results(m.name)), jobs[m.name].job_id) for m in machines]


def _follow(folder: Folder, machines, started, console, live: bool, stop: threading.Event) -> bool:
    """Poll the engines until every job ended; True when interrupted (its jobs cancelled)."""
    counter = Counter()
    with Display(console, live) as display:
        while True:
            for engine, jobs in started:
                engine.poll(jobs)
            display.show(_rows(folder, machines, started, counter))
            if all(j.phase in FINAL for _, js in started for j in js):
                return False
            if stop.wait(POLL_S):
                console.print("xpubench fleet: interrupted: cancelling the jobs it started (what arrived is kept)",
                              markup=False, highlight=False, soft_wrap=True)
                for engine, jobs in started:
                    engine.cancel(jobs)
                display.show(_rows(folder, machines, started, counter, cancelled=True))
                return True


def _save(folder: Folder, machines, started) -> None:
    folder.save_state({j.name: {"engine": engine.name, "job": j.job_id, "phase": j.phase,
                                "log": str(j.log) if j.log else None} for engine, js in started for j in js})


def _outcome(folder: Folder, machines, started, cancelled: bool) -> Outcome:
    counter = Counter()
    jobs: dict[str, Job] = {j.name: j for _, js in started for j in js}
    states = {}
    for m in machines:
        job, count = jobs[m.name], counter(folder.results(m.name))
        st = state(job, count, cancelled)
        line = (f"{count} cases" if st == DONE else why(job, count) if st not in (WRITTEN, SUBMITTED)
                else f"{job.job_id}: {engines.get(m.engine).next_step(m, folder)}")
        states[m.name] = (st, line)
    if cancelled:
        code = EXIT_INTERRUPTED
    elif all(st in (DONE, WRITTEN, SUBMITTED) for st, _ in states.values()):
        code = EXIT_OK
    else:
        code = EXIT_SOME_FAILED if any(st == DONE for st, _ in states.values()) else EXIT_NONE_OK
    return Outcome(states, code)


def results_files(folder: Folder) -> list[Path]:
    """The machines' results files that hold results (the summary's columns, in the fleet file's order)."""
    return [p for p in (folder.results(m.name) for m in folder.fleet.machines) if p.exists() and p.stat().st_size]


def collect(out: Path, *, run_module: str) -> Outcome:
    """The kubernetes and skypilot machines' logs (fetched with kubectl / sky where on PATH, else as put in
    DIR/logs/<name>.log) read into DIR/<name>.jsonl and its plan."""
    from xpubench.fleet.stream import messages, receive
    from xpubench.launch.runfile import held

    config = out / "fleet.toml"
    if not config.exists():
        raise UserError(f"cannot collect {shown(out)}: no fleet.toml in it (written by `xpubench fleet FILE -o DIR`)")
    folder = Folder(out, file.read(config), run_module)
    handed = [m for m in folder.fleet.machines if not engines.get(m.engine).follows]
    if not handed:
        raise UserError(f"{shown(out)} has no kubernetes or skypilot machine: the others' results are in DIR already")
    states = {}
    with held(folder.lock, create=True, what="fleet"):
        for m in handed:
            fetched = engines.get(m.engine).fetch_log(m, folder)
            log = folder.log(m.name)
            if not log.exists():
                where = f"put the pod's or task's log in {log}"
                states[m.name] = ("failed", f"no log: {fetched or 'not fetched'} ({where})")
                continue
            results = folder.results(m.name)
            results.write_bytes(b"")   # the log holds the run from its start
            with open(log, encoding="utf-8", errors="surrogateescape") as fh:
                got = receive(messages(fh), results)
            count = Counter()(results)
            if got.error:
                states[m.name] = ("failed", got.error)
            elif count.complete:
                states[m.name] = (DONE, f"{count} cases")
            else:
                ended = "still running or cut off" if got.exit_code is None else f"exit code {got.exit_code}"
                states[m.name] = ("failed" if got.exit_code is not None else "running",
                                  f"{got.lines} results lines so far ({ended}; cases {count})")
    code = EXIT_OK if all(st == DONE for st, _ in states.values()) else (
        EXIT_SOME_FAILED if any(st == DONE for st, _ in states.values()) else EXIT_NONE_OK)
    return Outcome(states, code)

