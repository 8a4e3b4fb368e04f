"""``xpubench doctor``'s adapters for PyTorch (doctor/probe.py): the benchmark's matmul adapters, an
allocation, the peak-memory counter, torch.compile, and CUDA events for the timing check."""

from __future__ import annotations

import time

import torch

from xpubench.backends.base import DoctorOps
from xpubench.backends.torch_.device import PeakMemory, sync, torch_device
from xpubench.backends.torch_.matmul import ops_for
from xpubench.backends.torch_.train import compile_problem
from xpubench.case import Case
from xpubench.devices import memory


def _in_use(device: torch.device) -> int | None:
    if device.type == "cuda":
        return int(torch.cuda.memory_allocated(device))
    if device.type == "mps":
        return int(torch.mps.current_allocated_memory())
    return memory.host_current_bytes()


def compile_check(device: torch.device) -> dict:
    """torch.compile (Inductor) of a small function on the device, run and checked. On the CPU,
    compile="auto" trains eager: only whether Inductor could work there is reported."""
    problem = compile_problem(device)
    if device.type == "cpu":
        return {"what": "torch.compile", "skipped": "compile=auto runs eager on the CPU"
                + (f"; torch.compile could not work here: {problem}" if problem else "; Inductor's compiler is here")}
    start = time.perf_counter()
    fn = torch.compile(lambda x: torch.sin(x) * 2 + 1)
    x = torch.linspace(-3, 3, 4096, device=device)
    y = fn(x)
    sync(device)
    seconds = time.perf_counter() - start
    if not torch.allclose(y, torch.sin(x) * 2 + 1, atol=1e-5):
        raise AssertionError("torch.compile's result differs from eager")
    return {"what": "torch.compile (Inductor)", "seconds": seconds}


def event_window(device: torch.device):
    """(CUDA-event seconds, synchronised wall seconds) of ``reps`` calls, for the timing check. The events
    are recorded on ``device``'s current stream, where its work runs: ``Event.record()`` without a stream
    records on the current device's stream, which for gpu:1 is gpu:0's idle one (a false FAIL)."""
    def window(call, reps: int) -> tuple[float, float]:
        with torch.cuda.device(device):
            stream = torch.cuda.current_stream(device)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            start.record(stream)
            for _ in range(reps):
                call()
            end.record(stream)
            end.synchronize()
            wall = time.perf_counter() - t0
        return start.elapsed_time(end) / 1000, wall
    return window


def doctor_ops(device_id: str) -> DoctorOps:
    device = torch_device(device_id)

    def allocate(n: int):
        held = torch.ones(n, dtype=torch.uint8, device=device)
        sync(device)
        return held

    return DoctorOps(
        matmul=lambda p: ops_for(Case(workload="matmul", backend="torch", device=device_id, mode="matmul",
                                      precision=p)),
        asynchronous=device.type in ("cuda", "mps"), allocate=allocate, memory_in_use=lambda: _in_use(device),
        peak=PeakMemory(device), compile_check=lambda: compile_check(device),
        event_window=event_window(device) if device.type == "cuda" else None)
