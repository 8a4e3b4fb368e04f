"""The measuring half of ``xpubench doctor``: runs in its own process per backend and device
(``python -m xpubench.doctor.probe CONFIG.json``) and prints raw measurements as JSON; the verdicts
are drawn in the parent (``checks.py``), where they can be tested with any numbers.

It drives the benchmark's own adapters (each backend's ``ops_for``: the same inputs, products, syncs and
placement the matmul benchmark uses) plus a few device helpers a backend supplies as ``DoctorOps``.
A measurement that raises is reported by name with its error; the others still run.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from xpubench.backends.base import DoctorOps

PRECISION_ROWS = 64          # result rows checked against float64 (the benchmark checks 8)
TIMING_MIN_WINDOW_S = 0.1    # a synchronised timing window lasts at least this long
TIMING_REPS = 8              # products per timing window: fewer than any runtime's in-flight limit
TIMING_MAX_SIZE = 16384      # the timing check's largest N (3 fp32 matrices of 1 GiB)


def relative_error(ops, n: int, rows: int = PRECISION_ROWS) -> float:
    """max |out - ref| / max |ref| over ``rows`` rows of one n x n product; ref in float64 from the
    inputs as the device holds them (already rounded to the precision)."""
    a, b = ops.make_inputs(n)
    out = ops.product(a, b)
    ops.sync(out)
    ref = ops.to_numpy(a)[:rows] @ ops.to_numpy(b)
    return float(np.abs(ops.to_numpy(out)[:rows] - ref).max() / max(np.abs(ref).max(), 1e-30))


def timing_windows(ops, n: int, reps: int = TIMING_REPS, windows: int = 3, clock=time.perf_counter) -> dict:
    """Windows of ``reps`` back-to-back products, each read twice: right after the last call returned
    (``dispatch_s``, no sync) and after the sync (``synced_s``); medians over the windows. ``reps`` stays
    below the runtimes' queue depth (XLA runs at most 32 computations in flight, then dispatch blocks);
    instead N doubles until ``reps`` products last ``TIMING_MIN_WINDOW_S``, timed by copying a row of
    the result to the host (a wait that does not depend on the sync under test)."""
    def one_product(a, b) -> float:
        start = clock()
        ops.to_numpy(ops.product(a, b)[:1])
        return clock() - start

    def window(a, b) -> tuple[float, float]:
        start = clock()
        out = None
        for _ in range(reps):
            out = ops.product(a, b)
        dispatched = clock() - start
        ops.sync(out)
        return dispatched, clock() - start

    while True:
        a, b = ops.make_inputs(n)
        one_product(a, b)                        # compiled and warm at this size
        if reps * one_product(a, b) >= TIMING_MIN_WINDOW_S or n >= TIMING_MAX_SIZE:
            break
        n *= 2
    pairs = [window(a, b) for _ in range(windows)]
    ops.to_numpy(ops.product(a, b)[:1])          # nothing left queued, whatever the sync did
    return {"reps": reps, "n": n, "dispatch_s": float(np.median([p[0] for p in pairs])),
            "synced_s": float(np.median([p[1] for p in pairs]))}


def warm_flops(ops, n: int, budget_s: float) -> float:
    """Warm FLOP/s of n x n products, timed as the benchmark times them (harness/matmul.py)."""
    from xpubench.harness.timing import time_windows, timed
    from xpubench.results.stats import summarize
    from xpubench.workloads.matmul import flops

    a, b = ops.make_inputs(n)
    for _ in range(3):
        timed(lambda: ops.product(a, b), ops.sync)
    windows = time_windows(lambda: ops.product(a, b), ops.sync, max_total_s=budget_s)
    return flops(n) / summarize(windows.samples).median


def memory_probe(dops: DoctorOps, nbytes: int, chunks: int = 16) -> dict:
    """The peak counter across holding ``nbytes`` on the device, beside the independent in-use reading.

    An allocator may hand back memory it already holds (freed by earlier work in the same process: a
    notebook, a test suite), so one allocation need not raise any counter. The probe keeps allocating
    chunks of ``nbytes`` (holding them, at most ``chunks``) until the in-use reading has risen by one
    chunk: from then on the memory is new and an honest peak counter must have risen with it. Where
    even ``chunks`` chunks were all recycled, the check says it could not tell (checks.memory)."""
    baseline = dops.memory_in_use()
    dops.peak.reset()
    held, in_use = [], baseline
    for _ in range(chunks):
        held.append(dops.allocate(nbytes))
        in_use = dops.memory_in_use()
        if baseline is None or in_use is None or in_use - baseline >= 0.9 * nbytes:
            break
    peak, count = dops.peak.read(), len(held)
    del held
    return {"allocated": nbytes, "chunks": count, "baseline": baseline, "in_use": in_use, "peak": peak}


def measure(config: dict, dops: DoctorOps) -> dict:
    """Every measurement the config asks for; each failure is kept as that measurement's error."""
    out: dict[str, Any] = {"backend": config["backend"], "device": config["device"],
                           "asynchronous": dops.asynchronous, "errors": {}}

    def attempt(name: str, fn: Callable[[], Any]) -> None:
        try:
            out[name] = fn()
        except Exception as exc:  # noqa: BLE001 - reported as that check's failure
            out["errors"][name] = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"

    def placement() -> str:
        ops = dops.matmul("fp32")
        a, b = ops.make_inputs(256)
        result = ops.product(a, b)
        ops.sync(result)
        return ops.placement(result)

    def timing() -> dict:
        ops = dops.matmul("fp32")
        found = timing_windows(ops, config["timing_size"])
        if dops.event_window:
            a, b = ops.make_inputs(found["n"])
            found["event_s"], found["event_wall_s"] = dops.event_window(lambda: ops.product(a, b), found["reps"])
        return found

    # memory first: XLA's peak counter has no reset, so it must see the allocation before any larger one
    # (earlier work in the process is handled by memory_probe's chunks)
    attempt("memory", lambda: memory_probe(dops, config["memory_bytes"]))
    attempt("placement", placement)
    attempt("timing", timing)
    attempt("precision", lambda: {p: relative_error(dops.matmul(p), config["precision_size"])
                                  for p in config["precisions"]})
    attempt("ceiling", lambda: {p: warm_flops(dops.matmul(p), config["ceiling_size"], config["ceiling_budget_s"])
                                for p in config["ceiling"]})
    attempt("compile", dops.compile_check)
    return out


def doctor_ops(backend: str, device: str) -> DoctorOps:
    from xpubench import backends

    return backends.get(backend).doctor_ops(device)


def main(argv: list[str]) -> int:
    from xpubench.launch.worker import prepare_environment

    with open(argv[0], encoding="utf-8") as fh:
        config = json.load(fh)
    prepare_environment(config["device"])          # as a case's worker does, before any framework import
    try:
        dops = doctor_ops(config["backend"], config["device"])
    except Exception as exc:  # noqa: BLE001 - e.g. the device is not there: every check reports it
        result = {"backend": config["backend"], "device": config["device"],
                  "errors": {"setup": f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"}}
    else:
        result = measure(config, dops)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
