"""The Python API (for notebooks and scripts) and the orchestration the CLI shares.

    import xpubench
    results = xpubench.run(workloads=["matmul"], backends=["numpy"], sizes=[1024])
    df = xpubench.load("results.jsonl")          # pandas DataFrame, one row per case
    xpubench.report(["a.jsonl", "b.jsonl"], "report.html")
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xpubench.errors import UserError
from xpubench.plan import Case, PlanRequest, build_cases
from xpubench.results import store
from xpubench.results.fingerprint import detect_environment, fingerprint
from xpubench.results.schema import Result


def default_output() -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(f"xpubench-{socket.gethostname()}-{stamp}.jsonl")


def plan_path(output: Path) -> Path:
    return output.with_name(output.name + ".plan.json")


def _write_plan(output: Path, cases: list[Case]) -> None:
    plan_path(output).write_text(json.dumps([c.as_dict() for c in cases], indent=1))


def _read_plan(output: Path) -> list[Case]:
    path = plan_path(output)
    if not path.exists():
        raise UserError(f"cannot resume {output}: its plan {path.name} is missing (it is written by `run`)")
    try:
        return [Case.from_dict(d) for d in json.loads(path.read_text())]
    except (json.JSONDecodeError, TypeError) as exc:
        raise UserError(f"cannot resume {output}: {path.name} is unreadable ({exc})") from None


@dataclasses.dataclass
class RunHooks:
    """Callbacks the terminal uses for progress; all optional."""

    on_plan: Callable[[list[Case], list[Case]], None] | None = None   # (all cases, cases to run)
    on_start: Callable[[Case], None] | None = None
    on_result: Callable[[Result], None] | None = None
    on_warning: Callable[[str], None] | None = None


def run(request: PlanRequest | None = None, *, output: str | Path | None = None,
        resume: str | Path | None = None, timeout_s: float | None = None,
        memory_limit_bytes: int | None = None, environment: dict | None = None,
        hooks: RunHooks | None = None, **request_fields: Any) -> list[Result]:
    """Plan, run every case in its own worker process, append each result to ``output`` as it ends.

    Pass a PlanRequest or its fields as keywords (``workloads=["matmul"], backends=["numpy"]``).
    With ``resume=FILE`` the plan is read back from FILE's sidecar and only cases with no result in
    FILE run. Returns the results of this call (for resume: the old ones too).
    """
    from xpubench.harness.runner import DEFAULT_TIMEOUT_S, run_cases

    hooks = hooks or RunHooks()
    env = environment or detect_environment()
    previous: list[Result] = []
    if resume is not None:
        if request is not None or request_fields:
            raise UserError("--resume takes the plan from the results file: give no other plan options")
        out = Path(resume)
        if not out.exists():
            raise UserError(f"cannot resume {out}: no such file")
        warning = store.drop_torn_tail(out)
        if warning and hooks.on_warning:
            hooks.on_warning(warning)
        cases = _read_plan(out)
        previous = store.load_file(out).results if out.stat().st_size else []
        done = {r.case.get("run_id") for r in previous}
        todo = [c for c in cases if c.run_id not in done]
    else:
        request = request or PlanRequest()
        if request_fields:
            request = dataclasses.replace(request, **request_fields)
        cases = build_cases(request, env)
        out = Path(output) if output else default_output()
        store.check_writable(out)
        if out.exists() and out.stat().st_size:
            raise UserError(f"{out} already holds results: choose another --output or --resume {out}")
        _write_plan(out, cases)
        todo = cases
    if hooks.on_plan:
        hooks.on_plan(cases, todo)
    quick_default = 600.0 if all(c.steps for c in todo if c.mode != "matmul") else DEFAULT_TIMEOUT_S
    results = run_cases(
        todo, out, fingerprint=fingerprint(env), timeout_s=timeout_s or quick_default,
        memory_limit_bytes=memory_limit_bytes, on_start=hooks.on_start, on_result=hooks.on_result,
    )
    return previous + results


def load(paths) -> Any:
    """Results files -> pandas DataFrame, one row per case, flat columns."""
    from xpubench.report.frame import results_frame

    loaded = store.load_results(paths)
    return results_frame(loaded)


def compare(a, b, **kwargs) -> Any:
    """Match the cases of two results files and return the comparison rows."""
    from xpubench.report.compare import compare_files

    return compare_files(a, b, **kwargs)


def report(paths, output: str | Path, *, fmt: str | None = None) -> Path:
    """Write a self-contained HTML page (or Markdown with PNG charts) from results files."""
    from xpubench.report.build import write_report

    return write_report(paths, Path(output), fmt=fmt)
