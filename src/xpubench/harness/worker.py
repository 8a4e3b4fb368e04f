"""The worker: runs exactly one case in its own process and writes its outcome as JSON.

    python -m xpubench.harness.worker CASE.json RESULT.json

An exception becomes status "error" (or "oom" when it is an out-of-memory error, host or device) with
its message. A crash or a hang leaves no RESULT file: the parent (runner.py) then records the signal or
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
import traceback
from pathlib import Path

from xpubench.harness.outcome import Outcome

MEMORY_LIMIT_ENV = "XPUBENCH_MEMORY_LIMIT"   # bytes of address space (RLIMIT_AS) for CPU cases, from the runner
PARENT_ENV = "XPUBENCH_PARENT_PID"           # the runner: when it dies, the worker kills itself

HOST_OOM_MARKERS = ("can't allocate memory", "cannot allocate memory", "defaultcpuallocator", "bad_alloc",
                    "failed to map segment")
# phrases only an accelerator's allocator writes (CUDA, ROCm/HIP, XLA, MPS); "resource_exhausted" is XLA's
# status for any allocator, so on a cpu case it is host memory
DEVICE_OOM_MARKERS = ("cuda out of memory", "cuda error: out of memory", "cudaerrormemoryallocation",
                      "hip out of memory", "hiperroroutofmemory", "mps backend out of memory",
                      "cublas_status_alloc_failed", "cudnn_status_alloc_failed", "resource_exhausted",
                      "oom when allocating")
OOM_MARKERS = ("out of memory", "resource_exhausted", "resource exhausted", "oom when allocating",
               "failed to allocate", "alloc_failed", *DEVICE_OOM_MARKERS, *HOST_OOM_MARKERS)
USER_ERRORS = ("UserError", "DataUnavailable")  # bad input found inside the worker (e.g. a corrupt file)


class OutOfMemory(MemoryError):
    """An out-of-memory error reported for another process (a DDP rank), whose kind ('host' or
    'device') was decided where the failure's own type and message were known."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


def is_accelerator(device: str) -> bool:
    """Whether a device spelling ('cpu', 'gpu:0', 'cuda:0', 'tpu', 'mps') names an accelerator."""
    return (device.split(":")[0].strip().lower() or "cpu") != "cpu"


def classify_exception(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "oom"
    text = f"{type(exc).__name__}: {exc}".lower()
    return "oom" if any(marker in text for marker in OOM_MARKERS) else "error"


def oom_kind_of(type_name: str, message: str, device: str) -> str:
    """'host' (RAM) or 'device' (accelerator memory) for an out-of-memory error known by its type name
    and message, raised in a case on ``device``. A cpu case is always host memory; on an accelerator
    an allocator's device phrase means device memory, a MemoryError or the CPU allocator's text host
    memory, and any other out-of-memory error (the framework's) device memory."""
    text = message.lower()
    if not is_accelerator(device):
        return "host"
    if any(m in text for m in DEVICE_OOM_MARKERS):
        return "device"
    if type_name == "MemoryError" or any(m in text for m in HOST_OOM_MARKERS):
        return "host"
    return "device"


def oom_kind(exc: BaseException, device: str) -> str:
    """'host' (RAM) or 'device' (accelerator memory) for an out-of-memory exception."""
    if isinstance(exc, OutOfMemory) and exc.kind in ("host", "device"):
        return exc.kind
    return oom_kind_of("MemoryError" if isinstance(exc, MemoryError) else type(exc).__name__, str(exc), device)


def outcome_of_exception(exc: BaseException, device: str) -> Outcome:
    first_line = (str(exc).strip().splitlines() or [""])[0][:500]
    name = type(exc).__name__
    status = classify_exception(exc)
    said = f"{name}: {first_line}" if first_line and not isinstance(exc, OutOfMemory) else first_line or name
    if name in USER_ERRORS:
        message = first_line or name  # already a complete sentence for the user
    elif status == "oom":
        message = f"{oom_kind(exc, device)} out of memory: {said}"
    else:
        message = said
    outcome = Outcome(status=status, message=message)
    outcome.metrics["error_type"] = name
    outcome.metrics["traceback"] = traceback.format_exc()[-4000:]
    return outcome


def execute(case) -> Outcome:
    if case.workload == "selftest":
        from xpubench.harness import selftest

        return selftest.run(case)
    from xpubench.backends import run_case

    return run_case(case)


def apply_memory_limit(device: str) -> None:
    """Cap the address space (RLIMIT_AS) of a CPU case before any framework is imported. Accelerator
    cases run without it: the CUDA, ROCm and TPU runtimes reserve far more address space than memory
    (unified virtual addressing, libtpu's mappings) and fail to start under any realistic cap; their
    device memory is bounded by the device itself. The cap is inherited by a CPU case's DDP ranks."""
    value = os.environ.get(MEMORY_LIMIT_ENV)
    if value and not is_accelerator(device):
        import resource

        limit = int(value)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def prepare_environment(device: str, environ=os.environ) -> None:
    """Framework settings every case's process needs, set before any framework is imported:
    JAX must not preallocate 75% of every visible GPU (XLA_PYTHON_CLIENT_PREALLOCATE=false, unless the
    user set it; the fingerprint records any such variable), and a CPU case sees no accelerator
    (JAX_PLATFORMS=cpu): it neither locks a TPU nor runs JAX's default-device work on a GPU."""
    environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if not is_accelerator(device):
        environ["JAX_PLATFORMS"] = "cpu"


def watch_parent(interval_s: float = 0.5) -> None:
    """If the runner dies (SIGKILL, closed terminal), end this worker and its children at once, so an
    orphan never competes with a resumed run for the device."""
    parent = os.environ.get(PARENT_ENV)
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
    from xpubench.plan import Case

    watch_parent()
    case_path, result_path = Path(argv[0]), Path(argv[1])
    case = Case.from_dict(json.loads(case_path.read_text()))   # imports no framework
    apply_memory_limit(case.device)
    prepare_environment(case.device)
    try:
        outcome = execute(case)
    except BaseException as exc:  # every failure becomes this case's result
        if isinstance(exc, KeyboardInterrupt):
            raise
        outcome = outcome_of_exception(exc, case.device)
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
