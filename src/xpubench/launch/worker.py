"""The worker: runs exactly one case in its own process and writes its outcome as JSON.

    python -m xpubench.launch.worker CASE.json RESULT.json

An exception becomes status "error" (or "oom" when it is an out-of-memory error, host or device) with
its message. A crash or a hang leaves no RESULT file: the parent (supervise.py) then records the signal or
the timeout. The worker never touches the results file: only the parent appends to it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from xpubench import backends, envnames
from xpubench.devices.device import is_accelerator
from xpubench.harness.failures import outcome_of_exception


def execute(case):
    from xpubench.launch.dispatch import run_case

    return run_case(case)


def apply_memory_limit(device: str) -> None:
    """Cap the address space (RLIMIT_AS) of a CPU case before any framework is imported. Accelerator
    cases run without it: the CUDA, ROCm and TPU runtimes reserve far more address space than memory
    (unified virtual addressing, libtpu's mappings) and fail to start under any realistic cap; their
    device memory is bounded by the device itself. The cap is inherited by a CPU case's DDP ranks."""
    value = os.environ.get(envnames.MEMORY_LIMIT)
    if value and not is_accelerator(device):
        import resource

        limit = int(value)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def prepare_environment(device: str, environ=os.environ, scratch: Path | None = None) -> None:
    """The settings every backend asks of a case's process, made before any framework is imported
    (``Backend.worker_environment``: JAX without GPU memory preallocation and, for a CPU case, without
    accelerators; torch's compilation caches empty in ``scratch``, the worker's private folder, so
    compile_s is a cold compile). Every backend's, so a user's model that imports another framework is
    covered too."""
    if scratch is not None:
        environ[envnames.SCRATCH] = str(scratch)
    for name in backends.names():
        backends.get(name).worker_environment(device, environ, scratch)


def import_preload(backend: str) -> None:
    """The backend's ``preload`` modules, imported before the case, untimed: a spawned worker then holds
    what a forked one finds imported (launch/forkserver.py), so no timed region (torch.optim's first
    step imports torch._dynamo) and no peak of memory depends on how the worker started. One that
    fails to import is left for the case to meet where it needs it."""
    import contextlib
    import importlib

    if not backends.known(backend):
        return
    for name in backends.record(backend).preload_modules(backend):
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def watch_parent(interval_s: float = 0.5) -> None:
    """If the runner dies (SIGKILL, closed terminal), end this worker and its children at once, so an
    orphan never competes with a resumed run for the device."""
    parent = os.environ.get(envnames.PARENT_PID)
    if not parent or not parent.isdigit():
        return
    parent_pid = int(parent)

    def loop() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent_pid:
                if os.getpgrp() == os.getpid():  # our own process group (the runner starts a session)
                    os.killpg(os.getpid(), signal.SIGKILL)
                os._exit(137)

    threading.Thread(target=loop, name="xpubench-watch-parent", daemon=True).start()


def main(argv: list[str]) -> int:
    from xpubench.case import Case
    from xpubench.workloads import with_identity

    watch_parent()
    case_path, result_path = Path(argv[0]), Path(argv[1])
    # the planned case as it was resolved, its options its workload's (typed); imports no framework
    case = with_identity(Case.from_dict(json.loads(case_path.read_text())))
    apply_memory_limit(case.device)
    prepare_environment(case.device, scratch=result_path.parent)   # the runner's private folder for this worker
    import_preload(case.backend)
    started = time.perf_counter()
    try:
        outcome = execute(case)
    except BaseException as exc:  # every failure becomes this case's result
        if isinstance(exc, KeyboardInterrupt):
            raise
        outcome = outcome_of_exception(exc, case.device)
    outcome.metrics["case_s"] = time.perf_counter() - started   # the run's estimates learn from it (launch/history.py)
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
