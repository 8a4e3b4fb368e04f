"""The engines a fleet drives, one small module each behind one interface (``Engine``): ``local`` (this
machine, one run after another), ``ssh`` (a box reached with OpenSSH), ``slurm`` (sbatch, squeue, sacct or
scontrol, scancel), ``kubernetes`` (an Indexed Job manifest, applied with kubectl) and ``skypilot`` (a task
YAML, launched with sky). xpubench keeps no queue or agent of its own: each engine hands the same plan to
the machine's own scheduler and follows what it says.

An engine declares what a ``[[machine]]`` entry of it may hold (``keys``: its own table's keys, or None
where its key holds one value; ``machine_keys``: the entry's other keys) and does four things:

| step | what |
|---|---|
| ``check(machines, fleet)`` | before anything is written: its programs on PATH, the partitions it names (UserError) |
| ``start(machines, fleet)`` | submit or start each machine's run; a ``Job`` per machine |
| ``poll(jobs)`` | each job's phase now: queued, running, or ended (with what ended it) |
| ``cancel(jobs)`` | stop the jobs this command started (Ctrl-C), and only those |

``describe(machines, fleet)`` gives ``--dry-run``'s lines: the command or script it would submit.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

QUEUED, RUNNING, ENDED = "queued", "running", "ended"
WRITTEN, SUBMITTED = "written", "submitted"   # handed over (kubernetes, skypilot): nothing here follows the run
FINAL = (ENDED, WRITTEN, SUBMITTED)
TAIL_LINES = 5   # the log lines a failed job's line quotes


@dataclass
class Job:
    """One machine's run as its engine follows it."""

    name: str
    phase: str = QUEUED
    ended: str = ""            # what ended it, when not the run's own exit: Slurm's state, a lost connection
    exit_code: int | None = None   # the run's exit code, where the engine knows it
    job_id: str = ""           # the engine's id (Slurm: 123 or 123_0), for the user and scancel
    log: Path | None = None    # where its output goes (the tail is quoted when it fails)
    handle: Any = field(default=None, repr=False)   # the engine's own (a process, a thread)


class Engine:
    """The interface (module docstring). ``keys`` maps each key of the engine's table to its kind (text,
    texts, whole, table, flag); ``required`` those it must have; ``machine_keys`` the entry's other keys."""

    name = ""
    keys: ClassVar[dict[str, str] | None] = None
    required: tuple[str, ...] = ()
    machine_keys: ClassVar[dict[str, str]] = {}
    follows = True   # False: nothing here follows it after submission (kubernetes, skypilot: --collect)

    def settings(self, value: Any, where: str) -> dict:
        """The engine's key as given -> its settings (a table's keys are checked by fleet/file.py)."""
        return dict(value) if isinstance(value, dict) else {}

    def check(self, machines: list, fleet) -> None:
        """UserError when a machine cannot be submitted (before anything is written)."""

    def describe(self, machines: list, fleet) -> list[str]:
        """``--dry-run``'s lines: each machine and what it would be sent."""
        return [line for m in machines for line in (f"{m.name} ({self.name}):",
                                                      *("  " + text for text in self.command(m, fleet)))]

    def command(self, machine, fleet) -> list[str]:
        """The command (or file) ``machine``'s run is handed to its engine as."""
        raise NotImplementedError

    def start(self, machines: list, fleet) -> list[Job]:
        raise NotImplementedError

    def poll(self, jobs: list[Job]) -> None:
        """Update each job's ``phase`` (and ``ended``, ``exit_code`` once it ended)."""

    def cancel(self, jobs: list[Job]) -> None:
        """Stop the jobs not yet ended (only those: the ones this command started)."""


NAMES = ("local", "ssh", "slurm", "kubernetes", "skypilot")


def get(name: str) -> Engine:
    return importlib.import_module(f"xpubench.fleet.engines.{name}").ENGINE


def tail(path: Path | None, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` non-blank lines of a log, joined by " | " ("" where there is none)."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - 16384))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    kept = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])
