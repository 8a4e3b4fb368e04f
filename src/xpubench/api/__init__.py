"""The Python API (for notebooks and scripts) and the orchestration the CLI shares.

    import xpubench
    results = xpubench.run(workloads=["matmul"], backends=["numpy"], sizes=[1024])
    df = xpubench.load("results.jsonl")          # pandas DataFrame, one row per case
    xpubench.report(["a.jsonl", "b.jsonl"], "report.html")
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xpubench import analysis
from xpubench.analysis import analyse
from xpubench.backends.fingerprint import busy_note, detect_environment, fingerprint
from xpubench.case import Case
from xpubench.ceilings.runtime import brief_bandwidth
from xpubench.ceilings.runtime import for_run as ceiling_record
from xpubench.errors import UserError, warn_caller
from xpubench.launch import runfile
from xpubench.launch.runfile import default_output, held, plan_path, read_plan, write_plan
from xpubench.plan import PlanRequest, build_cases, plan_notes
from xpubench.plan.fit import refusal
from xpubench.plan.target import default_processes
from xpubench.results import store
from xpubench.results.fold import aggregate_all
from xpubench.results.schema import Result, Run, retryable
from xpubench.results.validate import LARGEST, LARGEST_WHOLE

DEFAULT_PROCESSES = 3      # worker processes per case (docs/methodology.md, "Two levels of noise")
MIN_MEMORY_LIMIT = 256 << 20  # a bare Python worker with numpy; torch needs ~1 GiB, jax ~2 GiB of address space


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


@dataclasses.dataclass
class Plan:
    """What a run would do: its cases, the notes said before it, and the environment planned for."""

    cases: list[Case]
    notes: list[str]
    environment: dict


def plan(request: PlanRequest | None = None, *, environment: dict | None = None, environ: dict | None = None,
         **request_fields: Any) -> Plan:
    """The cases a run would execute, without running any (``xpubench run --dry-run``). With
    ``environment`` (another machine's ``xpubench env --json``) the plan is that machine's, and the
    environment variables warned about are the ones recorded there (``environ`` overrides them)."""
    request = _request(request, request_fields)
    # here: only the backends the plan reads (-b numpy: no torch or JAX import)
    env = environment if environment is not None else _detect(request.backends) if request.backends else _detect()
    cases = build_cases(request, env)
    if environ is None:
        environ = env.get("variables") or {} if environment is not None else dict(os.environ)
    return Plan(cases, plan_notes(request, env, cases, environ=environ), env)


@dataclasses.dataclass
class RunHooks:
    """Callbacks the terminal uses for progress; all optional."""

    on_plan: Callable[[list[Case], int, int], None] | None = None     # (cases, processes, runs left)
    on_start: Callable[[Case, int], None] | None = None                # (case, process index)
    on_result: Callable[[Run], None] | None = None                     # one process's run
    on_warning: Callable[[str], None] | None = None
    on_budget: Callable[[Any], None] | None = None                    # the run's harness.budget.Budget
    on_cut: Callable[[Case, int], None] | None = None                  # a process the budget left out
    on_note: Callable[[str], None] | None = None                       # the plan's notes (else on_warning)


def run(request: PlanRequest | None = None, *, output: str | Path | None = None,
        resume: str | Path | None = None, timeout_s: float | None = None,
        memory_limit_bytes: int | None = None, processes: int | None = None, environment: dict | None = None,
        hooks: RunHooks | None = None, measure_ceilings: bool = False, allow_changed_model: bool = False,
        **request_fields: Any) -> list[Result]:
    """Plan, run every case in ``processes`` worker processes of its own (default DEFAULT_PROCESSES,
    interleaved with the other cases), append each process's result to ``output`` as it ends.

    Pass a PlanRequest or its fields as keywords (``workloads=["matmul"], backends=["numpy"]``).
    With ``resume=FILE`` the plan is read back from FILE's sidecar and only the processes with no result
    in FILE run (a case that failed on bad input found in its worker, a missing or corrupt file, runs
    again). A resume says which model files it will import and refuses one whose sha256 differs from the
    plan's unless ``allow_changed_model``. Returns one Result per case (for resume: the earlier ones too).
    Only one run writes a file at a time (runfile.held): a second is refused in one line.

    ``budget_s`` (a PlanRequest field; default 150 s when no workload is named, else unlimited) bounds
    the whole run, detection, worker start and compilation included (launch/budget.py); a resumed run
    has no budget: it finishes what is left.
    The measured ceilings the
    results are ranked against come from the cache; ``measure_ceilings=True`` measures the missing ones
    first (docs/ceilings.md).
    """
    import time

    from xpubench.devices.device import is_accelerator
    from xpubench.launch.runner import DEFAULT_TIMEOUT_S, run_cases

    began = time.monotonic()
    hooks = hooks or RunHooks()
    budget = None
    check_run_settings(timeout_s, memory_limit_bytes, processes)
    previous: list[Run] = []
    with contextlib.ExitStack() as stack:
        if resume is not None:
            if output is not None and Path(output) != Path(resume):
                raise UserError("--resume appends to the file it resumes: give no other output")
            out = Path(resume)
            if processes is not None:
                raise UserError("--resume runs the number of processes its plan has: drop --processes")
            cases, previous, settings = _resume_state(out, request, request_fields, hooks, stack)
            timeout_s = timeout_s or settings.get("timeout_s")
            memory_limit_bytes = memory_limit_bytes or settings.get("memory_limit_bytes")
            processes = settings.get("processes") or 1  # plans written before processes were repeated: 1
            check_run_settings(timeout_s, memory_limit_bytes, processes)
            earlier = [r for r in previous if not retryable(r)]   # bad input fixed since: run it again
            pending = _pending(cases, processes, earlier)
            left = len(pending)
            _say_resume(out, [c for c, _ in pending], previous, hooks, allow_changed_model)
            env = environment or (_detect(sorted({c.backend for c, _ in pending})) if left else {})
        else:
            request = _request(request, request_fields)
            out = Path(output) if output else default_output()
            check_new_output(out)
            planned = plan(request, environment=environment, environ=dict(os.environ))
            env, cases = planned.environment, planned.cases
            processes = processes or default_processes(cases, DEFAULT_PROCESSES)   # a target: 5 seeds
            left = len(cases) * processes
            for note in planned.notes:   # what the plan left out and why (as `--dry-run` says them)
                (hooks.on_note or (lambda n: _warn(hooks, n)))(note)
            budget = _budget(request, env, began, hooks)
            if budget:
                cases = budget.order(cases)
            stack.enter_context(held(out, create=True))   # before the plan: a second run is refused here
            write_plan(out, cases, {"timeout_s": timeout_s, "memory_limit_bytes": memory_limit_bytes,
                                    "processes": processes, "budget_s": budget.total_s if budget else None})
            earlier = []
        if memory_limit_bytes and any(is_accelerator(c.device) for c in cases):
            _warn(hooks, "--memory-limit applies to CPU cases only: accelerator cases run without an address-space "
                  "cap (their runtimes reserve more address space than memory)")
        if hooks.on_plan:
            hooks.on_plan(cases, processes, left)
        if budget and hooks.on_budget:
            hooks.on_budget(budget)
        quick_default = 600.0 if all(c.steps for c in cases if c.mode != "matmul") else DEFAULT_TIMEOUT_S
        fp = fingerprint(env)
        if left:   # the measured ceilings this run is ranked against (ceilings/runtime.py)
            fp["ceilings"] = ceiling_record(env, cases, measure=measure_ceilings, on_note=lambda n: _warn(hooks, n))
            # no bandwidth for a language model's decode bound: a brief one, measured now; the FLOP/s ceilings
            # missing are said once under the summary (report/tables/summary.py ceiling_note), not here
            brief_bandwidth(fp["ceilings"], env, cases, on_note=lambda n: _warn(hooks, n))
        busy = busy_note(fp.get("cpu_busy_at_start")) if left else None
        if busy:
            _warn(hooks, busy)
        runs = run_cases(
            cases, out, fingerprint=fp, processes=processes, timeout_s=timeout_s or quick_default,
            memory_limit_bytes=memory_limit_bytes, on_start=hooks.on_start, on_result=hooks.on_result,
            earlier=earlier, budget=budget, on_cut=hooks.on_cut, refuse=lambda case: refusal(case, env),
        )
    said = budget.summary(processes) if budget else None
    if said:
        _warn(hooks, said)
    return analyse(aggregate_all(previous + runs))


def _budget(request: PlanRequest, env: dict, began: float, hooks: RunHooks | None = None):
    """The run's harness.budget.Budget (None: unlimited), its clock started when run() was called; none
    for a run over several hosts (harness/cluster.py budget_note, said as a warning)."""
    from xpubench.harness.cluster import budget_note, from_env
    from xpubench.launch.budget import REPEAT_SAFETY, RESERVE_S, Budget, default_budget
    from xpubench.plan.estimate import case_seconds

    total = default_budget(request.budget_s, workloads_given=bool(request.workloads or request.model or request.all_cases))
    lockstep = budget_note(from_env())
    if total and lockstep:
        _warn(hooks or RunHooks(), lockstep)
        return None
    return Budget(total, estimate=lambda case: case_seconds(case, env)[0], started=began, reserve_s=RESERVE_S,
                  repeat_safety=REPEAT_SAFETY) if total else None


def check_new_output(out: Path) -> None:
    """A new run writes a new or empty regular file it can write: one holding results is resumed,
    anything else is not ours (one line each; ``--dry-run`` checks the same)."""
    store.check_writable(out)
    if out.exists() and out.stat().st_size:
        if store.holds_results(out):
            raise UserError(f"{out} already holds results: choose another --output or --resume {out}")
        raise UserError(f"{out} is not empty and is not an xpubench results file: choose another --output "
                        "(a run writes a new or empty file)")


def _say_resume(out: Path, todo: list[Case], previous: list[Run], hooks: RunHooks, allow_changed_model: bool) -> None:
    """The cases run again after bad input, and the model files the resume imports (refused if changed)."""
    retried = list(dict.fromkeys(r.key for r in previous if retryable(r)))
    if retried:
        _warn(hooks, f"running again {len(retried)} case(s) that failed on bad input (fixed since?): "
              + ", ".join(retried[:3]) + (" ..." if len(retried) > 3 else ""))
    models = runfile.check_models(out, todo, allow_changed=allow_changed_model)
    if models:
        _warn(hooks, f"--resume imports model file(s): {'; '.join(models)}")


def _pending(cases: list[Case], processes: int, previous: list[Run]) -> list[tuple[Case, int]]:
    """The (case, process) a resumed run still has to start (a case with a failed process starts no more)."""
    done = {(r.case.get("run_id"), r.process) for r in previous}
    stopped = {r.case.get("run_id") for r in previous if r.status != "ok"}
    return [(c, i) for c in cases for i in range(processes) if (c.run_id, i) not in done and c.run_id not in stopped]


def _warn(hooks: RunHooks, message: str) -> None:
    """To the CLI's hook, or as a Python warning in a notebook."""
    if hooks.on_warning:
        hooks.on_warning(message)
    else:
        warn_caller(message)   # at the user's line, however deep the call (xpubench.bench -> run -> ...)


def _detect(backends: list[str] | None = None) -> dict:
    """The environment (in a child process) of the named backends (and those they run on), else of every
    one; a broken detection is one line, not a traceback."""
    import subprocess

    from xpubench.backends.detect import needed

    try:
        needs = needed(backends)
        return detect_environment(backends=needs) if needs else detect_environment()
    except (RuntimeError, ValueError, OSError, subprocess.SubprocessError) as exc:
        raise UserError(f"{' '.join(str(exc).split())}; check the framework installs with `xpubench env`") from None


def _request(request: PlanRequest | None, fields: dict) -> PlanRequest:
    """A PlanRequest and keywords (a field's name, or an option's TOML key: options.request_fields)."""
    from xpubench.plan import validate
    from xpubench.plan.options import request_fields

    request = request or PlanRequest()
    if fields:
        updates = request_fields(fields)
        if isinstance(updates.get("options"), dict) and isinstance(request.options, dict):
            updates["options"] = {**request.options, **updates["options"]}
        request = dataclasses.replace(request, **updates)
    validate(request)  # bad input fails fast, before device detection
    return request


def _resume_state(out: Path, request, request_fields, hooks: RunHooks, stack: contextlib.ExitStack):
    """(all cases, runs already in ``out``, the run's settings) for --resume.

    The file is locked first, then read; a torn last line is cut off only once the rest has loaded."""
    if request is not None or request_fields:
        raise UserError("--resume takes the plan from the results file: give no other plan options")
    if not out.exists():
        raise UserError(f"cannot resume {out}: no such file")
    store.check_writable(out)
    stack.enter_context(held(out, create=False))   # first: another run or resume on it is refused here
    cases, settings = read_plan(out)
    previous: list[Run] = []
    if out.stat().st_size:
        loaded = store.load_file(out)  # refuses a file that is not results before anything changes
        previous = loaded.runs
    warning = store.drop_torn_tail(out)
    if warning and hooks.on_warning:
        hooks.on_warning(warning)
    planned = {c.run_id for c in cases}
    stray = [r for r in previous if r.case.get("run_id") not in planned]
    if stray and hooks.on_warning:
        hooks.on_warning(f"{out}: {len(stray)} result(s) are not in its plan {plan_path(out).name}; kept as they are")
    return cases, previous, settings


def load(paths) -> Any:
    """Results files -> pandas DataFrame, one row per case, flat columns."""
    from xpubench.report.base.frame import results_frame

    return results_frame(analysis.load(paths))


def compare(a, b, *more, **kwargs) -> Any:
    """Match the cases of B (and more files) with those of A; one report.compare.Comparison per later
    file: rows (medians, ratio B/A, 95% bootstrap interval, verdict) and what differs between the files.
    ``min_change`` (default 0.05): the smallest change called significant."""
    from xpubench.report.compare import compare_files

    return compare_files(a, b, *more, **kwargs)


def report(paths, output: str | Path, *, fmt: str | None = None, force: bool = False) -> Path:
    """Write a self-contained HTML page (or Markdown with PNG charts) from results files. ``output`` may
    be new, empty or a report xpubench wrote; ``force=True`` replaces any other file except results."""
    from xpubench.report.render.build import write_report

    return write_report(paths, Path(output), fmt=fmt, force=force)
