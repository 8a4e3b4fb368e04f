"""Where each machine stands, read from DIR as it grows: queued / running / done / failed (written or
submitted for the engines nothing here follows), and cases done out of planned (the machine's plan sidecar
against its results file: a case is done when none of its processes is left to run, as `run --resume` counts
them). On a terminal a live table; otherwise a line each time a machine's state or count changes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xpubench.errors import UserError
from xpubench.fleet.engines import ENDED, Job, tail
from xpubench.fleet.folder import plan_of
from xpubench.legible.plaintext import shown

DONE, FAILED, CANCELLED = "done", "failed", "cancelled"


@dataclass
class Count:
    done: int | None = None      # None: no plan yet
    planned: int | None = None

    @property
    def complete(self) -> bool:
        return self.planned is not None and self.done == self.planned

    def __str__(self) -> str:
        return "-" if self.planned is None else f"{self.done}/{self.planned}"


class Counter:
    """Cases done and planned of each results file, read again only when the file or its plan changed."""

    def __init__(self) -> None:
        self._seen: dict[Path, tuple[tuple, Count]] = {}

    def __call__(self, results: Path) -> Count:
        plan = plan_of(results)
        stamp = (_stamp(results), _stamp(plan))
        if results in self._seen and self._seen[results][0] == stamp:
            return self._seen[results][1]
        count = count_cases(results)
        self._seen[results] = (stamp, count)
        return count


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def count_cases(results: Path) -> Count:
    """Cases done (none of their processes left to run) and planned, from the plan sidecar and the file."""
    from xpubench.launch.orchestration import pending_processes
    from xpubench.launch.runfile import read_plan
    from xpubench.results import store
    from xpubench.results.schema import retryable

    if not plan_of(results).exists():
        return Count()
    try:
        cases, settings = read_plan(results)
        runs = store.load_file(results).runs if results.exists() and results.stat().st_size else []
    except UserError:
        return Count()
    left = {c.run_id for c, _ in pending_processes(cases, settings.get("processes") or 1,
                                                    [r for r in runs if not retryable(r)])}
    return Count(len(cases) - len(left), len(cases))


def state(job: Job, count: Count, cancelled: bool = False) -> str:
    """The machine's state: the engine's phase while it runs; once ended, done where every planned case
    is in its file, else failed (cancelled where this command cancelled it)."""
    if job.phase != ENDED:
        return job.phase
    if count.complete:
        return DONE
    return CANCELLED if cancelled else FAILED


def why(job: Job, count: Count) -> str:
    """A failed machine's line: what ended it (Slurm's state, ssh's error) or the run's exit code, then the
    tail of its log."""
    said = job.ended or (f"the run ended with exit code {job.exit_code}" if job.exit_code is not None else "")
    if count.planned is not None and not count.complete:
        said += f"{'; ' if said else ''}{count.planned - (count.done or 0)} of {count.planned} cases not finished"
    log = tail(job.log)
    if log and log not in said:
        said += f"; log {job.log}: {log}"
    return shown(said)


class Display:
    """The live table (a terminal) or a line per change."""

    def __init__(self, console, live: bool):
        self.console, self.live, self._said = console, None, {}
        if live:
            from rich.live import Live

            self.live = Live(console=console, auto_refresh=False, transient=False)

    def __enter__(self):
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live:
            self.live.__exit__(*exc)

    def show(self, rows: list[tuple[str, str, str, Count, str]]) -> None:
        """rows: (machine, engine, state, count, job id)."""
        if self.live:
            from rich.table import Table

            table = Table("machine", "engine", "state", "cases", "job", title="xpubench fleet", title_justify="left")
            for name, engine, st, count, job_id in rows:
                table.add_row(shown(name), engine, st, str(count), shown(job_id))
            self.live.update(table, refresh=True)
            return
        for name, engine, st, count, job_id in rows:
            now = (st, str(count))
            if self._said.get(name) != now:
                self._said[name] = now
                self.console.print(f"{name} ({engine}{', ' + job_id if job_id else ''}): {st}, cases {count}",
                                   markup=False, highlight=False, soft_wrap=True)
