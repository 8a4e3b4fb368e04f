"""Out-of-memory is told apart from other failures, and host memory from device memory.

In the worker: from the exception a framework raises (torch's OutOfMemoryError, JAX's
JaxRuntimeError RESOURCE_EXHAUSTED, ROCm's HIP errors, MemoryError). In the parent, when the worker
left no result: from the exit (SIGKILL / 137) and the telling line of its stderr.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from worker_processes import workers_below

from xpubench.case import Case
from xpubench.harness import failures
from xpubench.harness.failures import OutOfMemory, classify_exception, oom_kind, outcome_of_exception
from xpubench.launch import supervise

TORCH_CUDA = ("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.11 GiB total capacity; 76.50 GiB "
              "already allocated; 1.02 GiB free; 77.00 GiB reserved in total by PyTorch)")
JAX_XLA = ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4294967296 bytes. "
           "BufferAssignment OOM Debugging.")
TORCH_HIP = ("HIP out of memory. Tried to allocate 1.50 GiB (GPU 0; 63.98 GiB total capacity; "
             "62.10 GiB already allocated)")
HIP_RUNTIME = "HIP error: hipErrorOutOfMemory\nHIP kernel errors might be asynchronously reported"
CPU_ALLOCATOR = ("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: "
                 "you tried to allocate 68719476736 bytes. Error code 12 (Cannot allocate memory)")


def torch_oom(message: str) -> BaseException:
    torch = pytest.importorskip("torch")
    exc = torch.OutOfMemoryError(message)
    assert isinstance(exc, RuntimeError)  # what torch.cuda.OutOfMemoryError is
    return exc


def jax_oom(message: str) -> BaseException:
    errors = pytest.importorskip("jax.errors")
    return errors.JaxRuntimeError(message)


def raised(exc: BaseException, device: str):
    """outcome_of_exception as the worker calls it: inside the except block."""
    try:
        raise exc
    except type(exc) as caught:
        return outcome_of_exception(caught, device)


@pytest.mark.parametrize("make,message", [(torch_oom, TORCH_CUDA), (jax_oom, JAX_XLA),
                                          (lambda m: RuntimeError(m), TORCH_HIP),
                                          (lambda m: RuntimeError(m), HIP_RUNTIME)],
                         ids=["torch cuda", "jax xla", "torch hip", "hip runtime"])
def test_framework_oom_is_device_memory_on_an_accelerator_and_host_memory_on_cpu(make, message):
    exc = make(message)
    assert classify_exception(exc) == "oom"
    for device in ("cuda:0", "gpu:0", "gpu", "tpu:0", "mps"):
        assert oom_kind(exc, device) == "device", device
    assert oom_kind(exc, "cpu") == "host"
    outcome = raised(exc, "gpu:0")
    assert outcome.status == "oom"
    first_line = message.splitlines()[0]
    assert outcome.message == f"device out of memory: {type(exc).__name__}: {first_line}"
    assert outcome.metrics["error_type"] == type(exc).__name__
    assert type(exc).__name__ in outcome.metrics["traceback"]
    assert raised(exc, "cpu").message.startswith("host out of memory: ")


def test_host_memory_on_an_accelerator_case_stays_host():
    for exc in (MemoryError("Unable to allocate 64.0 GiB for an array"), RuntimeError(CPU_ALLOCATOR)):
        assert classify_exception(exc) == "oom"
        assert oom_kind(exc, "gpu:0") == "host"
        assert raised(exc, "gpu:0").message.startswith("host out of memory: ")


def test_ordinary_errors_are_not_oom():
    for exc in (RuntimeError("CUDA error: device-side assert triggered"), ValueError("shape mismatch on device"),
                RuntimeError("Expected all tensors to be on the same device, but found cuda:0 and cpu")):
        assert classify_exception(exc) == "error"
        outcome = raised(exc, "gpu:0")
        assert outcome.status == "error" and "out of memory" not in outcome.message


def test_an_oom_carrying_its_kind_keeps_it():
    exc = OutOfMemory("rank 1 ran out of memory: OutOfMemoryError: " + TORCH_CUDA, kind="device")
    assert isinstance(exc, MemoryError) and classify_exception(exc) == "oom"
    assert oom_kind(exc, "gpu:0") == "device"
    assert raised(exc, "gpu:0").message.startswith(
        "device out of memory: rank 1 ran out of memory: OutOfMemoryError: CUDA")
    assert oom_kind(OutOfMemory("rank 0 was killed by SIGKILL", kind="host"), "gpu:0") == "host"


# the parent's view: no RESULT file, only the exit code and the telling line of stderr
LIMIT = 1 << 30


@pytest.mark.parametrize("code,tail,device,limit,status,starts", [
    (-signal.SIGKILL, "", "cpu", None, "oom", "host out of memory: the worker was killed by SIGKILL"),
    (137, "", "gpu:0", LIMIT, "oom", "host out of memory: the worker was killed by SIGKILL"),
    (-signal.SIGABRT, f"torch.OutOfMemoryError: {TORCH_CUDA}", "gpu:0", None, "oom", "device out of memory: "),
    (1, f"jaxlib.xla_extension.XlaRuntimeError: {JAX_XLA}", "tpu:0", None, "oom", "device out of memory: "),
    (1, HIP_RUNTIME.splitlines()[0], "gpu:1", None, "oom", "device out of memory: "),
    (1, f"XlaRuntimeError: {JAX_XLA}", "cpu", None, "oom", "host out of memory: "),
    (-signal.SIGABRT, "terminate called after throwing an instance of 'std::bad_alloc'", "gpu:0", None, "oom",
     "host out of memory: "),
    # "device" / "gpu" / "cuda" alone say nothing about memory, nor which memory ran out
    (-signal.SIGABRT, "what():  std::bad_alloc (copying the batch to the device)", "cpu", None, "oom",
     "host out of memory: "),
    (-signal.SIGSEGV, "Fatal Python error: Segmentation fault in the CUDA device driver (gpu 0)", "gpu:0", None,
     "crash", "worker died from SIGSEGV"),
    (3, "RuntimeError: CUDA error: an illegal memory access was encountered", "gpu:0", None, "crash",
     "worker exited with code 3"),
    # a thread that could not start is memory only under --memory-limit
    (-signal.SIGABRT, "pthread_create() failed: Resource temporarily unavailable", "cpu", None, "crash",
     "worker died from SIGABRT"),
    (1, "OSError: [Errno 11] Resource temporarily unavailable", "cpu", None, "crash", "worker exited with code 1"),
    (-signal.SIGABRT, "pthread_create() failed: Resource temporarily unavailable", "cpu", LIMIT, "oom",
     "host out of memory (--memory-limit 1024 MiB): pthread_create() failed"),
])
def test_a_worker_without_result_is_classified_by_its_evidence(tmp_path, code, tail, device, limit, status, starts):
    outcome = supervise._outcome(code, tmp_path / "no-result.json", tail, limit, device)
    assert outcome["status"] == status, outcome
    assert outcome["message"].startswith(starts), outcome


def test_the_memory_line_of_stderr_is_the_one_that_counts(tmp_path):
    err = tmp_path / "stderr.txt"
    err.write_text("W0101 00:00:00 pthread_create() failed: Resource temporarily unavailable (retrying)\n"
                   f"torch.OutOfMemoryError: {TORCH_CUDA}\n"
                   "Fatal Python error: Aborted\n\nCurrent thread 0x00007f (most recent call first):\n"
                   '  File "train.py", line 12 in step\n')
    tail = failures.stderr_tail(err)
    assert tail == f"torch.OutOfMemoryError: {TORCH_CUDA}"
    outcome = supervise._outcome(-signal.SIGABRT, tmp_path / "no-result.json", tail, None, "gpu:0")
    assert outcome == {"status": "oom", "message": f"device out of memory: {tail}"}
    err.write_text("Fatal Python error: Aborted\npthread_create() failed: Resource temporarily unavailable\n")
    assert failures.stderr_tail(err) == "pthread_create() failed: Resource temporarily unavailable"


def selftest(behaviour, **opts) -> Case:
    return Case(workload="selftest", backend="numpy", device="cpu", mode="train", batch_size=1,
                options={"behaviour": behaviour, **opts})


@pytest.mark.slow
def test_worker_exiting_137_is_host_oom(tmp_path):
    outcome, _ = supervise.run_one(selftest("exit", code=137), timeout_s=30, workdir=tmp_path)
    assert outcome["status"] == "oom", outcome
    assert outcome["message"].startswith(
        "host out of memory: the worker was killed by SIGKILL (the kernel's OOM killer, most likely)")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_worker_killed_by_sigkill_is_host_oom_with_the_memory_limit_named(tmp_path):
    killed: list[int] = []

    def kill_the_worker():  # what the kernel's OOM killer does
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not killed:
            for pid in workers_below(os.getpid()):
                time.sleep(0.3)  # let it start sleeping
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_worker)
    killer.start()
    try:
        outcome, wall = supervise.run_one(selftest("hang"), timeout_s=25, memory_limit_bytes=LIMIT, workdir=tmp_path)
    finally:
        killer.join()
    assert killed, "the worker was never seen"
    assert outcome["status"] == "oom", outcome
    assert outcome["message"].startswith("host out of memory: the worker was killed by SIGKILL")
    assert "(--memory-limit 1024 MiB)" in outcome["message"]
    assert wall < 20  # ended by the kill, not by the timeout
