"""The Python API (for notebooks and scripts), which the CLI shares; a run's steps are launch/'s
(``launch.orchestration.Launch``), handed here what the layers above launch/ know.

    import xpubench
    results = xpubench.run(workloads=["matmul"], backends=["numpy"], sizes=[1024])
    df = xpubench.load("results.jsonl")          # pandas DataFrame, one row per case
    xpubench.report(["a.jsonl", "b.jsonl"], "report.html")
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from xpubench import analysis
from xpubench.analysis import analyse
from xpubench.backends.fingerprint import detect_environment
from xpubench.case import Case
from xpubench.ceilings.runtime import brief_bandwidth
from xpubench.ceilings.runtime import for_run as ceiling_record
from xpubench.errors import UserError
from xpubench.launch.hooks import RunHooks
from xpubench.launch.orchestration import MIN_MEMORY_LIMIT, Launch, Settings, check_run_settings  # noqa: F401 - api's
from xpubench.launch.runfile import default_output, held, plan_path  # noqa: F401 - plan_path: the sidecar's name, for callers
from xpubench.plan import PlanRequest, build_cases
from xpubench.plan.fit import refusal
from xpubench.plan.notes import plan_notes
from xpubench.plan.request import budget_s, worker_processes
from xpubench.plan.resolve import recorded_case
from xpubench.results import store
from xpubench.results.fold import aggregate_all
from xpubench.results.schema import Result
from xpubench.serve.host import Hosts


@dataclasses.dataclass
class Plan:
    """What a run would do: its cases, the notes said before it, the environment planned for, the run's
    budget (None: unlimited) and its worker processes per case (plan/request.py decides both)."""

    cases: list[Case]
    notes: list[str]
    environment: dict
    budget_s: float | None
    processes: int


def plan(request: PlanRequest | None = None, *, environment: dict | None = None, environ: dict | None = None,
         processes: int | None = None, **request_fields: Any) -> Plan:
    """What a run would do, without running any case (``xpubench run --dry-run``; ``run`` runs this plan):
    ``xpubench.plan()`` with no arguments is the brief default run, as `xpubench run` is. With
    ``environment`` (another machine's ``xpubench env --json``) the plan is that machine's, and the
    environment variables warned about are the ones recorded there (``environ`` overrides them).
    ``processes``: worker processes per case (default: plan/request.py ``worker_processes``)."""
    request = _request(request, request_fields)
    # here: only the backends the plan reads (-b numpy: no torch or JAX import)
    env = environment if environment is not None else _detect(_read_by(request))
    cases = build_cases(request, env)
    if environ is None:
        environ = env.get("variables") or {} if environment is not None else dict(os.environ)
    return Plan(cases, plan_notes(request, env, cases, environ=environ), env, budget_s(request),
                worker_processes(cases, processes))


def run(request: PlanRequest | None = None, *, output: str | Path | None = None,
        resume: str | Path | None = None, timeout_s: float | None = None,
        memory_limit_bytes: int | None = None, processes: int | None = None, environment: dict | None = None,
        hooks: RunHooks | None = None, measure_ceilings: bool = False, allow_changed_model: bool = False,
        hosts: Any = None, **request_fields: Any) -> list[Result]:
    """Plan (``plan``: with no arguments the brief default run, as `xpubench run`), run every case in
    ``processes`` worker processes of its own (default 3, 5 seeds with a target: plan/request.py; interleaved
    with the other cases), append each process's result to ``output`` as it ends.

    Pass a PlanRequest or its fields as keywords (``workloads=["matmul"], backends=["numpy"]``).
    With ``resume=FILE`` the plan is read back from FILE's sidecar and only the processes with no result
    in FILE run (a case that failed on bad input found in its worker, a missing or corrupt file, runs
    again). A resume says which model files it will import and refuses one whose sha256 differs from the
    plan's unless ``allow_changed_model``. Returns one Result per case (for resume: the earlier ones too).
    Only one run writes a file at a time (runfile.held): a second is refused in one line.

    ``budget_s`` (a PlanRequest field; default 150 s for the brief run, else unlimited) bounds
    the whole run, detection, worker start and compilation included (launch/budget.py); a resumed run
    has no budget: it finishes what is left.
    The measured ceilings the
    results are ranked against come from the cache; ``measure_ceilings=True`` measures the missing ones
    first (docs/ceilings.md).

    The run's steps are launch/orchestration.py's ``Launch``; this function gives it what the layers
    above launch/ know (the plan, the budget's estimate, the memory-fit refusal, the ceilings, the servers
    serve cases share: ``hosts``, serve/host.py's ``Hosts``, by default one that says what it starts and
    records a server that does not start as each of its points' failure).
    """
    import time

    from xpubench.launch.history import Recorder, entries_of
    from xpubench.plan.learnt import Estimator, took_lines

    began = time.monotonic()
    settings = Settings(timeout_s, memory_limit_bytes, processes)
    settings.check()
    with Launch(hooks) as launch:
        if resume is not None:
            out = _resume_target(output, resume, processes, request, request_fields)
            launch.resume(out, settings, allow_changed_model=allow_changed_model,
                          detect=lambda backends: environment or _detect(backends))
            estimate = Estimator(launch.env, extra=entries_of(launch.previous))   # learnt from the file too
        else:
            request = _request(request, request_fields)
            out = Path(output) if output else default_output()
            check_new_output(out)
            planned = plan(request, environment=environment, environ=dict(os.environ), processes=processes)
            settings.processes = planned.processes
            estimate = Estimator(planned.environment)   # plan/learnt.py: what --dry-run said
            launch.start_new(out, planned.cases, planned.environment, settings, planned.notes,
                             budget=lambda: _budget(planned.budget_s, estimate.seconds, began))
        estimates = {c.run_id: estimate(c) for c in launch.cases} if launch.left else {}
        launch.announce()
        launch.fingerprint(ceilings=lambda env, cases, note: _ceilings(env, cases, measure_ceilings, note))
        history = Recorder(launch.env, {k: e.modelled for k, e in estimates.items()})
        launch.sweep(refuse=lambda case: refusal(case, launch.env), learn=history.add,
                     hosts=hosts or Hosts(say=launch.hooks.note))
        runs = launch.finish()
    if history.problem:
        launch.hooks.warn(history.problem)
    for line in took_lines(launch.runs, estimates, time.monotonic() - began):
        if launch.hooks.on_timing:
            launch.hooks.on_timing(line)
    return analyse(aggregate_all(runs, recorded_case))   # a resumed file's older lines: migrated (results/schema.py)


def _ceilings(env: dict, cases: list[Case], measure: bool, on_note) -> dict:
    """The measured ceilings this run is ranked against (ceilings/runtime.py); no bandwidth for a language
    model's decode bound: a brief one, measured now. The FLOP/s ceilings missing are said once under the
    summary (report/tables/summary.py ceiling_note), not here."""
    record = ceiling_record(env, cases, measure=measure, on_note=on_note)
    brief_bandwidth(record, env, cases, on_note=on_note)
    return record


def _resume_target(output, resume, processes, request, request_fields) -> Path:
    """The file --resume appends to, once the options that can't go with it are refused (one line each)."""
    if output is not None and Path(output) != Path(resume):
        raise UserError("--resume appends to the file it resumes: give no other output")
    if processes is not None:
        raise UserError("--resume runs the number of processes its plan has: drop --processes")
    if request is not None or request_fields:
        raise UserError("--resume takes the plan from the results file: give no other plan options")
    return Path(resume)


def _budget(total: float | None, estimate, began: float):
    """The run's launch.budget.Budget of ``total`` seconds (the plan's; None: unlimited), its clock started
    when run() was called, its cases admitted by ``estimate`` (a case -> seconds of one worker process:
    plan/learnt.py). In a run over several processes it is process 0's: it decides for all (launch/launchers/)."""
    from xpubench.launch.budget import REPEAT_SAFETY, RESERVE_S, Budget

    return Budget(total, estimate=estimate, started=began, reserve_s=RESERVE_S,
                  repeat_safety=REPEAT_SAFETY) if total else None


def check_new_output(out: Path) -> None:
    """A new run writes a new or empty regular file it can write: one holding results is resumed,
    anything else is not ours (one line each; ``--dry-run`` checks the same)."""
    store.check_writable(out)
    if os.path.lexists(out):   # a link, or a file another run holds: refused before the plan (which may ask a
        with held(out, create=False):   # server at a URL), holding nothing yet (the run takes it after the plan)
            pass
    if out.exists() and out.stat().st_size:
        if store.holds_results(out):
            raise UserError(f"{out} already holds results: choose another --output or --resume {out}")
        raise UserError(f"{out} is not empty and is not an xpubench results file: choose another --output "
                        "(a run writes a new or empty file)")


def _read_by(request: PlanRequest) -> list[str] | None:
    """The backends whose records a plan of ``request`` reads (None: every one); a sweep of a server at a URL
    reads none but the host's (``_detect``)."""
    if request.options.get("url") and request.modes == ["serve"]:
        return []
    return request.backends


def _detect(backends: list[str] | None = None) -> dict:
    """The environment (in a child process) of the named backends (and those they run on), else of every
    one; a broken detection is one line, not a traceback."""
    import subprocess

    from xpubench.backends import known
    from xpubench.backends.detect import needed

    if backends is not None and backends and not any(known(b) for b in backends):
        backends = []   # only a URL's server, no backend of this machine's (serve/keys.py BACKEND): the host
    try:
        needs = [] if backends == [] else needed(backends)
        return detect_environment(backends=needs) if needs is not None else detect_environment()
    except (RuntimeError, ValueError, OSError, subprocess.SubprocessError) as exc:
        raise UserError(f"{' '.join(str(exc).split())}; check the framework installs with `xpubench env`") from None


def _request(request: PlanRequest | None, fields: dict) -> PlanRequest:
    """A PlanRequest and keywords (a field's name, or an option's TOML key: options_given.request_fields)."""
    from xpubench.plan.options_given import request_fields
    from xpubench.plan.validation import validate

    request = request or PlanRequest()
    if fields:
        updates = request_fields(fields)
        if isinstance(updates.get("options"), dict) and isinstance(request.options, dict):
            updates["options"] = {**request.options, **updates["options"]}
        request = dataclasses.replace(request, **updates)
    validate(request)  # bad input fails fast, before device detection
    return request


def load(paths) -> Any:
    """Results files -> pandas DataFrame, one row per case, flat columns typed as the results are
    (report/base/frame.py)."""
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
