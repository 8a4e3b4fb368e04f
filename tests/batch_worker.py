"""Several cases in one worker process, each run as launch/worker.py runs its one case (the environment
prepared before any framework is imported, every exception the case's outcome), for the tests that check
what an outcome holds rather than the process boundary: one process start and one framework import
(torch ~3.5 s CPU, Keras ~5-10 s) for many cases instead of one per case. Keras picks its backend at
import, so the cases of one batch share one Keras backend (or use none).

    python tests/batch_worker.py CASES.json OUTCOMES.json

Tests call ``run_cases(items)``: an item is a Case (its outcome as ``launch.supervise.run_one`` returns it,
the dict of an ``Outcome``) or a call, ``("module:function", *arguments)``, of a function of a module in
tests/, in the same process (what it returns, as JSON): a check that needs the framework set up as a
worker sets it up, without a process of its own.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
# ``env=ONE_THREAD``: one CPU thread per kernel library in the worker, as conftest's one_thread_workers, for
# tests about what a case records, not how fast (two OpenMP threads spinning on 2 shared cores cost CPU)
ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


def run_cases(items: list, timeout_s: float = 600, env: dict | None = None) -> list:
    """Run ``items`` (Cases or calls) one after another in one fresh worker process, with ``env`` added to
    its environment."""
    from xpubench.results.outcome import Outcome

    with tempfile.TemporaryDirectory(prefix="xpubench-batch-") as tmp:
        cases_path, out_path = Path(tmp) / "cases.json", Path(tmp) / "outcomes.json"
        cases_path.write_text(json.dumps([item if isinstance(item, tuple) else item.as_dict() for item in items]))
        env = {**os.environ, **(env or {}),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run([sys.executable, __file__, str(cases_path), str(out_path)], capture_output=True,
                              text=True, timeout=timeout_s, env=env, stdin=subprocess.DEVNULL, check=False)
        assert done.returncode == 0 and out_path.exists(), done.stderr[-3000:]
        return [o if isinstance(item, tuple) else dataclasses.asdict(Outcome.from_dict(o))
                for item, o in zip(items, json.loads(out_path.read_text()), strict=True)]


def main(cases_path: str, out_path: str) -> None:
    from xpubench.case import Case
    from xpubench.harness.failures import outcome_of_exception
    from xpubench.launch.worker import _jsonable, execute, prepare_environment

    items = [d if isinstance(d, list) else Case.from_dict(d) for d in json.loads(Path(cases_path).read_text())]
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="xpubench-batch-scratch-") as scratch:
        prepare_environment("cpu", scratch=Path(scratch))
        for case in items:
            if isinstance(case, list):
                module, _, function = case[0].partition(":")
                outcomes.append(getattr(importlib.import_module(module), function)(*case[1:]))
                continue
            try:
                outcome = execute(case)
            except Exception as exc:  # noqa: BLE001 - every failure becomes the case's result, as in the worker
                outcome = outcome_of_exception(exc, case.device)
            outcomes.append(json.loads(json.dumps(dataclasses.asdict(outcome), default=_jsonable)))
    Path(out_path).write_text(json.dumps(outcomes))


if __name__ == "__main__":
    main(*sys.argv[1:])
