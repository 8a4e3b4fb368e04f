"""The worker: runs exactly one case in its own process and writes its outcome as JSON.

    python -m xpubench.harness.worker CASE.json RESULT.json

An exception becomes status "error" (or "oom" when it is an out-of-memory error) with its message. A
crash or a hang leaves no RESULT file: the parent (runner.py) then records the signal or the timeout.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import traceback
from pathlib import Path

from xpubench.harness.outcome import Outcome

OOM_MARKERS = ("out of memory", "resource_exhausted", "resource exhausted", "oom when allocating",
               "failed to allocate", "cannot allocate memory", "hip out of memory")


def classify_exception(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "oom"
    text = f"{type(exc).__name__}: {exc}".lower()
    return "oom" if any(marker in text for marker in OOM_MARKERS) else "error"


def execute(case) -> Outcome:
    if case.workload == "selftest":
        from xpubench.harness import selftest

        return selftest.run(case)
    from xpubench.backends import run_case

    return run_case(case)


def main(argv: list[str]) -> int:
    from xpubench.plan import Case

    case_path, result_path = Path(argv[0]), Path(argv[1])
    case = Case.from_dict(json.loads(case_path.read_text()))
    try:
        outcome = execute(case)
    except BaseException as exc:  # noqa: BLE001 - every failure becomes this case's result
        if isinstance(exc, KeyboardInterrupt):
            raise
        first_line = (str(exc).strip().splitlines() or [""])[0][:500]
        outcome = Outcome(status=classify_exception(exc), message=f"{type(exc).__name__}: {first_line}")
        outcome.metrics["traceback"] = traceback.format_exc()[-4000:]
    tmp = result_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(dataclasses.asdict(outcome), default=_jsonable))
    os.replace(tmp, result_path)
    return 0


def _jsonable(value):
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
