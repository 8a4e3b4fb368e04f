"""A run, in named steps: ``Launch`` holds what one run of the cases needs (its results file and lock,
its plan, settings and budget, the environment, the runs already in the file) and does it in order:

    start_new(...) | resume(...)   lock the results file; a new run writes its plan sidecar (runfile.py),
                                   a resumed one reads it, with the runs already there and what is left
    announce()                     the plan to the progress hooks (and the memory-limit caveat)
    fingerprint(ceilings)          the environment's fingerprint, with the measured ceilings the results
                                   are ranked against (a callable: ceilings/ is above launch/)
    sweep(refuse, learn)           every (case, process) left, through runner.run_cases (each ok process
                                   also to the timing history: launch/history.py)
    finish()                       the budget's summary said; the runs, earlier ones first

``api.run`` (and so ``xpubench run`` and the notebook's ``xpubench.run``/``bench``) drives it; what a
higher layer knows (the planner, the estimate the budget uses, the memory-fit refusal, the ceilings) is
passed in. Used as a context manager: the lock is held from the first step to the last, and on Ctrl-C
every run already appended stays in the file (the sweep appends each the moment it ends).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Self

from xpubench.backends.fingerprint import busy_note, fingerprint
from xpubench.case import Case
from xpubench.devices.device import is_accelerator
from xpubench.errors import UserError
from xpubench.launch import forkserver, runfile, runner
from xpubench.launch.budget import Budget
from xpubench.launch.hooks import RunHooks
from xpubench.launch.runfile import held, plan_path, read_plan, write_plan
from xpubench.results import store
from xpubench.results.schema import Run, cut_short, retryable
from xpubench.results.validate import LARGEST, LARGEST_WHOLE

MIN_MEMORY_LIMIT = 256 << 20  # a bare Python worker with numpy; torch needs ~1 GiB, jax ~2 GiB of address space
BRIEF_TIMEOUT_S = 600.0      # a worker's timeout when every model case is capped in steps


@dataclasses.dataclass
class Settings:
    """How each worker runs: its timeout and address-space cap, and the processes per case."""

    timeout_s: float | None = None
    memory_limit_bytes: int | None = None
    processes: int | None = None

    def check(self) -> None:
        """One line each (flags, a config file, keywords or a plan sidecar)."""
        check_run_settings(self.timeout_s, self.memory_limit_bytes, self.processes)

    def as_plan(self, budget: Budget | None) -> dict:
        return {"timeout_s": self.timeout_s, "memory_limit_bytes": self.memory_limit_bytes,
                "processes": self.processes, "budget_s": budget.total_s if budget else None}


def check_run_settings(timeout_s, memory_limit_bytes, processes=None) -> None:
    """The run settings (flags, a config file or keywords), checked here only: one line each."""
    if processes is not None and (isinstance(processes, bool) or not isinstance(processes, int) or processes < 1):
        raise UserError(f"--processes must be a whole number of at least 1, got {processes!r}")
    if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float))
                                  or not 0 < timeout_s <= LARGEST):   # what a plan can hold (validate.py)
        raise UserError(f"--timeout must be a number of seconds above 0 (at most {LARGEST:g}), got {timeout_s!r}")
    if memory_limit_bytes is not None and (isinstance(memory_limit_bytes, bool)
                                           or not isinstance(memory_limit_bytes, int)):
        raise UserError(f"--memory-limit must be a size like \"8G\" or a number of bytes, got {memory_limit_bytes!r}")
    if memory_limit_bytes is not None and memory_limit_bytes >= LARGEST_WHOLE:
        raise UserError(f"--memory-limit must be below 8E (2**63 bytes), got {memory_limit_bytes!r}")
    if memory_limit_bytes is not None and memory_limit_bytes < MIN_MEMORY_LIMIT:
        raise UserError(f"--memory-limit of {memory_limit_bytes / (1 << 20):g} MiB is too small: a worker needs at "
                        "least 256M of address space (torch about 1G, jax about 2G)")
    forkserver.method(device_is_accelerator=False)   # XPUBENCH_LAUNCH, if set, names a method


class Launch:
    """One run of a plan's cases (the module docstring lists its steps)."""

    def __init__(self, hooks: RunHooks | None = None) -> None:
        self.hooks = hooks or RunHooks()
        self.out: Path | None = None
        self.cases: list[Case] = []
        self.env: dict = {}
        self.settings = Settings()
        self.budget: Budget | None = None
        self.previous: list[Run] = []      # runs already in the file (--resume)
        self.earlier: list[Run] = []       # those that count as done (not failed on bad input)
        self.left = 0                      # worker processes still to start
        self.prints: dict = {}             # the fingerprint every result carries
        self.runs: list[Run] = []          # this run's
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Self:
        self._stack.__enter__()
        return self

    def __exit__(self, *exc) -> bool:
        return bool(self._stack.__exit__(*exc))

    # ---- the first step: a new run, or the rest of one ---------------------------------------------

    def start_new(self, out: Path, cases: list[Case], env: dict, settings: Settings, notes: list[str] = (),
                  budget: Callable[[], Budget | None] = lambda: None) -> None:
        """A new run of ``cases``: the plan's notes said, its budget (``budget()``) ordering them, the
        results file locked, then the plan sidecar written (a second run on the file is refused first)."""
        self.out, self.env, self.settings = out, env, settings
        self.left = len(cases) * settings.processes
        for note in notes:   # what the plan left out and why (as `--dry-run` says them)
            self.hooks.note(note)
        self.budget = budget()
        self.cases = self.budget.order(cases) if self.budget else list(cases)
        self._stack.enter_context(held(out, create=True))   # before the plan: a second run is refused here
        write_plan(out, self.cases, settings.as_plan(self.budget))

    def resume(self, out: Path, settings: Settings, detect: Callable[[list[str]], dict],
               allow_changed_model: bool = False) -> None:
        """The rest of the run in ``out``: locked, then read (its plan sidecar, its runs; a torn last line
        cut off once the rest loaded); the sidecar's settings under the given ones; the environment of the
        backends left to run (``detect``). A resumed run has no budget: it finishes what is left."""
        if not out.exists():
            raise UserError(f"cannot resume {out}: no such file")
        store.check_writable(out)
        self._stack.enter_context(held(out, create=False))   # first: another run or resume on it is refused here
        self.out = out
        self.cases, saved = read_plan(out)
        if out.stat().st_size:
            self.previous = store.load_file(out).runs   # refuses a file that is not results before anything changes
        warning = store.drop_torn_tail(out)
        if warning and self.hooks.on_warning:
            self.hooks.on_warning(warning)
        planned = {c.run_id for c in self.cases}
        stray = [r for r in self.previous if r.case.get("run_id") not in planned]
        if stray and self.hooks.on_warning:
            self.hooks.on_warning(f"{out}: {len(stray)} result(s) are not in its plan {plan_path(out).name}; "
                                  "kept as they are")
        self.settings = Settings(settings.timeout_s or saved.get("timeout_s"),
                                 settings.memory_limit_bytes or saved.get("memory_limit_bytes"),
                                 saved.get("processes") or 1)   # plans written before processes were repeated: 1
        self.settings.check()
        self.earlier = [r for r in self.previous if not retryable(r)]   # bad input fixed since: run it again
        pending = pending_processes(self.cases, self.settings.processes, self.earlier)
        self.left = len(pending)
        self._say_resume([c for c, _ in pending], allow_changed_model)
        self.env = detect(sorted({c.backend for c, _ in pending})) if self.left else {}

    def _say_resume(self, todo: list[Case], allow_changed_model: bool) -> None:
        """The cases run again after bad input, and the model files the resume imports (refused if changed)."""
        for why, which in (("failed on bad input (fixed since?)", lambda r: retryable(r) and not cut_short(r)),
                           ("a stop cut short", cut_short)):
            retried = list(dict.fromkeys(r.key for r in self.previous if which(r)))
            if retried:
                self.hooks.warn(f"running again {len(retried)} case(s) that {why}: "
                                + ", ".join(retried[:3]) + (" ..." if len(retried) > 3 else ""))
        models = runfile.check_models(self.out, todo, allow_changed=allow_changed_model)
        if models:
            self.hooks.warn(f"--resume imports model file(s): {'; '.join(models)}")

    # ---- the steps every run takes ------------------------------------------------------------------

    def announce(self) -> None:
        """The plan to the progress hooks, and the memory-limit caveat of accelerator cases."""
        if self.settings.memory_limit_bytes and any(is_accelerator(c.device) for c in self.cases):
            self.hooks.warn("--memory-limit applies to CPU cases only: accelerator cases run without an "
                            "address-space cap (their runtimes reserve more address space than memory)")
        if self.hooks.on_plan:
            self.hooks.on_plan(self.cases, self.settings.processes, self.left)
        if self.budget and self.hooks.on_budget:
            self.hooks.on_budget(self.budget)

    def fingerprint(self, ceilings: Callable[[dict, list[Case], Callable[[str], None]], dict] | None = None) -> dict:
        """The fingerprint every result carries; with processes left, the measured ceilings the run is
        ranked against (``ceilings(env, cases, on_note)``) and a note when the machine was busy."""
        self.prints = fingerprint(self.env)
        if self.left and ceilings is not None:
            self.prints["ceilings"] = ceilings(self.env, self.cases, self.hooks.warn)
        busy = busy_note(self.prints.get("cpu_busy_at_start")) if self.left else None
        if busy:
            self.hooks.warn(busy)
        return self.prints

    def timeout_s(self) -> float:
        """Each worker's timeout: the one given, else 10 minutes where every model case is capped in steps
        (the brief run), else runner.DEFAULT_TIMEOUT_S."""
        capped = all(c.steps for c in self.cases if c.mode != "matmul")
        return self.settings.timeout_s or (BRIEF_TIMEOUT_S if capped else runner.DEFAULT_TIMEOUT_S)

    def sweep(self, refuse: Callable[[Case], str | None] | None = None,
              learn: Callable[[Run], None] | None = None, hosts=None) -> list[Run]:
        """Every (case, process) left, each result appended the moment it exists (runner.run_cases), then
        handed to ``learn`` (the timing history's recorder) and the progress hook; ``hosts`` opens the servers
        serve cases share (serve/host.py)."""
        def on_result(run: Run) -> None:
            if learn:
                learn(run)
            if self.hooks.on_result:
                self.hooks.on_result(run)

        self.runs = runner.run_cases(
            self.cases, self.out, fingerprint=self.prints, processes=self.settings.processes,
            timeout_s=self.timeout_s(), memory_limit_bytes=self.settings.memory_limit_bytes,
            on_start=self.hooks.on_start, on_result=on_result, earlier=self.earlier,
            budget=self.budget, on_cut=self.hooks.on_cut, refuse=refuse, hosts=hosts, on_warning=self.hooks.warn)
        return self.runs

    def finish(self) -> list[Run]:
        """The budget's summary said; every run of the file's plan, the earlier ones first."""
        said = self.budget.summary(self.settings.processes) if self.budget else None
        if said:
            self.hooks.warn(said)
        return self.previous + self.runs


def pending_processes(cases: list[Case], processes: int, previous: list[Run]) -> list[tuple[Case, int]]:
    """The (case, process) a resumed run still has to start (a case with a failed process starts no more)."""
    done = {(r.case.get("run_id"), r.process) for r in previous}
    stopped = {r.case.get("run_id") for r in previous if r.status != "ok"}
    return [(c, i) for c in cases for i in range(processes) if (c.run_id, i) not in done and c.run_id not in stopped]
