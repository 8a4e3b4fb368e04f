"""How a failed case is classified, in one place: out of memory (host or device) or another error, from
an exception inside the worker (``outcome_of_exception``), from a rank's error (``OutOfMemory``,
backends/torch_/ddp.py), or, when the worker died without a result, from its exit code and the telling
line of its stderr (``dead_worker``, used by the runner).

Out of memory is only what the evidence says: the allocators' own phrases, a MemoryError, SIGKILL / exit
137 (the kernel's OOM killer), a thread that could not be created under --memory-limit. A cpu case's
out-of-memory is always host memory; on an accelerator an allocator's device phrase is device memory.
"""

from __future__ import annotations

import signal
import traceback
from pathlib import Path

from xpubench.devices.device import is_accelerator
from xpubench.results.outcome import Outcome
from xpubench.results.schema import USER_ERRORS  # bad input found inside the worker (e.g. a corrupt file)

# an exception's text (lower case) that names an out-of-memory error
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



class OutOfMemory(MemoryError):
    """An out-of-memory error reported for another process (a DDP rank), whose kind ('host' or
    'device') was decided where the failure's own type and message were known."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


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



# ---- a worker that died without a result (the runner reads its exit code and stderr) --------------------

# a native abort's line that names an allocation failure (the allocator or the loader found no memory)
NATIVE_HOST_OOM_MARKERS = ("MemoryError", "bad_alloc", "failed to map segment", "Memory allocation",
                           "Cannot allocate memory", "cannot allocate memory", "out of memory")
# a thread that could not be created: no address space for its stack under --memory-limit, but also a
# process or thread limit (ulimit -u, cgroup pids.max); counted as memory only under a memory limit
THREAD_OOM_MARKERS = ("pthread_create", "Resource temporarily unavailable")
# the lines that name a memory failure, picked before a thread-creation failure or any other error line
OOM_LINE_MARKERS = (*NATIVE_HOST_OOM_MARKERS, "RESOURCE_EXHAUSTED", "hipErrorOutOfMemory",
                    "cudaErrorMemoryAllocation", "ALLOC_FAILED")


def signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def stderr_tail(path: Path, lines: int = 3) -> str:
    """The telling part of a dead worker's stderr: the first line naming a memory failure, else a
    thread that could not be created, else an error (stack dumps of native aborts come after it), else
    the last few lines."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - (256 << 10)))
            text = [t.strip() for t in fh.read().decode(errors="replace").splitlines() if t.strip()]
    except OSError:
        return ""
    for markers in (OOM_LINE_MARKERS, THREAD_OOM_MARKERS,
                    ("Check failed", "what():", "Error", "error:", "Fatal", "FATAL")):
        telling = [t for t in text if any(m in t for m in markers)]
        if telling:
            return telling[0][:600]
    return " | ".join(text[-lines:])[-600:]


# a native abort that names an allocation failure (the allocator or the loader found no memory)
NATIVE_HOST_OOM_MARKERS = ("MemoryError", "bad_alloc", "failed to map segment", "Memory allocation",
                    "Cannot allocate memory", "cannot allocate memory", "out of memory")
# a thread that could not be created: no address space for its stack under --memory-limit, but also a
# process or thread limit (ulimit -u, cgroup pids.max); counted as memory only under a memory limit
THREAD_OOM_MARKERS = ("pthread_create", "Resource temporarily unavailable")
# the lines that name a memory failure, picked before a thread-creation failure or any other error line
OOM_LINE_MARKERS = (*NATIVE_HOST_OOM_MARKERS, "RESOURCE_EXHAUSTED", "hipErrorOutOfMemory", "cudaErrorMemoryAllocation",
                    "ALLOC_FAILED")


def dead_worker(code: int, tail: str, memory_limit_bytes: int | None, device: str = "cpu") -> dict:
    """The outcome of a worker that exited without a result, from its exit code and the telling line of
    its stderr (``stderr_tail``): SIGKILL / exit 137 (the kernel's OOM killer) is host memory; an
    allocator's device phrase ("CUDA out of memory", "RESOURCE_EXHAUSTED", "hipErrorOutOfMemory", ...)
    or "out of memory" in a case on an accelerator is device memory; the host allocator's text is host
    memory; a thread that could not be created is host memory only under --memory-limit. Everything
    else is a crash."""
    detail = f": {tail}" if tail else ""
    limit = f" (--memory-limit {memory_limit_bytes / (1 << 20):g} MiB)" if memory_limit_bytes else ""
    if code in (-signal.SIGKILL, 137):
        return {"status": "oom", "message": "host out of memory: the worker was killed by SIGKILL "
                f"(the kernel's OOM killer, most likely){limit}{detail}"}
    kind = oom_kind_of_tail(tail, device, memory_limit_bytes)
    if kind == "device":
        return {"status": "oom", "message": f"device out of memory{detail}"}
    if kind == "host":
        return {"status": "oom", "message": f"host out of memory{limit}{detail}"}
    if code < 0:
        return {"status": "crash", "message": f"worker died from {signal_name(-code)}{detail}"}
    return {"status": "crash", "message": f"worker exited with code {code} and no result{detail}"}


def oom_kind_of_tail(tail: str, device: str, memory_limit_bytes: int | None) -> str | None:
    """'device', 'host' or None (not an out-of-memory) for the telling line of a dead worker's stderr."""
    lower = tail.lower()
    if any(m in lower for m in DEVICE_OOM_MARKERS):
        return "device" if is_accelerator(device) else "host"
    if "out of memory" in lower and is_accelerator(device):
        return "device"
    if any(m in tail for m in NATIVE_HOST_OOM_MARKERS):
        return "host"
    if memory_limit_bytes and any(m in tail for m in THREAD_OOM_MARKERS):
        return "host"
    return None
