"""Measuring ceilings for one backend and device: in this process (``search``, ``bandwidth``), or
isolated in a child process (``measure_in_subprocess``), and through the cache (``ceilings_for``).

The adapters are each backend record's (``Backend.ceiling_ops()``: a module with ``gemm_ops(device,
precision)`` and ``stream_ops(device)``), imported only when asked for, so this module stays framework-free.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xpubench import backends
from xpubench.ceilings import cache
from xpubench.devices.device import is_accelerator
from xpubench.errors import UserError
from xpubench.harness.bandwidth import DEFAULT_BUDGET_S as BANDWIDTH_BUDGET_S
from xpubench.harness.bandwidth import Bandwidth, measure_bandwidth
from xpubench.harness.ceiling import DEFAULT_BUDGET_S, Ceiling, candidate_shapes, search_ceiling
from xpubench.harness.timing import Clock


def _adapter(backend: str):
    """The backend record's ceiling adapters (gemm_ops, stream_ops); one line where it has none."""
    record = backends.get(backend) if backends.known(backend) else None
    ops = record.ceiling_ops() if record else None
    if ops is None:
        raise UserError(f"no ceiling adapter for backend {backend!r} (known: {', '.join(with_ceilings())})")
    return ops


def with_ceilings() -> list[str]:
    """The backends whose ceilings ``xpubench ceilings`` can measure."""
    return [name for name in backends.names() if backends.get(name).ceiling_module]


def precisions_of(backend: str) -> tuple[str, ...]:
    return backends.get(backend).ceiling_dtypes if backends.known(backend) else ()


def default_sizes(accelerator: bool) -> tuple[int, ...]:
    from xpubench.plan import MATMUL_SIZES, MATMUL_SIZES_ACCEL

    return tuple(MATMUL_SIZES_ACCEL if accelerator else MATMUL_SIZES)


def search(backend: str, device: str, precision: str, *, budget_s: float | None = None,
           sizes: Sequence[int] | None = None, clock: Clock = time.perf_counter) -> Ceiling:
    """The compute ceiling of ``backend`` on ``device`` at ``precision`` (harness/ceiling.py), in this
    process. ``budget_s`` defaults to 30 s on a CPU and 60 s on an accelerator."""
    if precision not in precisions_of(backend):
        raise UserError(f"{backend} has no {precision} matmul to search (it has: {', '.join(precisions_of(backend))})")
    accelerator = is_accelerator(device)
    ops = _adapter(backend).gemm_ops(device, precision)
    shapes = candidate_shapes(sizes or default_sizes(accelerator), accelerator, element_bytes=ops.element_bytes,
                              memory_bytes=ops.memory_bytes)
    budget = budget_s or DEFAULT_BUDGET_S["accelerator" if accelerator else "cpu"]
    return search_ceiling(ops, shapes, backend=backend, device=device, precision=precision, budget_s=budget,
                          clock=clock)


def bandwidth(backend: str, device: str, *, budget_s: float = BANDWIDTH_BUDGET_S, array_bytes: int | None = None,
              spec_bytes_per_s: float | None = None) -> Bandwidth:
    """Copy and triad GB/s of ``backend`` on ``device`` (harness/bandwidth.py), in this process."""
    ops = _adapter(backend).stream_ops(device, array_bytes)
    return measure_bandwidth(ops, backend=backend, device=device, budget_s=budget_s, spec_bytes_per_s=spec_bytes_per_s)


def measure_in_subprocess(backend: str, device: str, precisions: Sequence[str], *, budget_s: float | None = None,
                          with_bandwidth: bool = True, spec_bytes_per_s: float | None = None,
                          timeout_s: float | None = None, bandwidth_budget_s: float | None = None
                          ) -> tuple[list[Ceiling], Bandwidth | None]:
    """Run ``python -m xpubench.ceilings`` in a child (the parent never imports a framework) and read
    its JSON. Raises RuntimeError with the child's last stderr line when it fails."""
    argv = ["--precisions", ",".join(precisions)] + (["--budget", str(budget_s)] if budget_s else [])
    if with_bandwidth:
        argv += ["--bandwidth"] + (["--spec-bandwidth", str(spec_bytes_per_s)] if spec_bytes_per_s else [])
        argv += ["--bandwidth-budget", str(bandwidth_budget_s)] if bandwidth_budget_s else []
    data = _child(backend, device, argv, timeout_s)
    ceilings = [Ceiling.from_dict(c) for c in data["ceilings"]]
    return ceilings, Bandwidth.from_dict(data["bandwidth"]) if data.get("bandwidth") else None


def brief_bandwidths(backend: str, device: str, *, measurements: int, budget_s: float,
                     spec_bytes_per_s: float | None = None, timeout_s: float | None = None) -> list[Bandwidth]:
    """``measurements`` brief copy/triad measurements of ``budget_s`` each, one after the other in one child
    (its start and the framework's import paid once): a run's own bandwidth, its spread across them."""
    argv = ["--precisions", "", "--bandwidth", "--bandwidth-budget", str(budget_s),
            "--bandwidth-repeats", str(measurements)]
    data = _child(backend, device, argv + (["--spec-bandwidth", str(spec_bytes_per_s)] if spec_bytes_per_s else []),
                  timeout_s)
    return [Bandwidth.from_dict(b) for b in data["bandwidths"]]


def _child(backend: str, device: str, argv: list[str], timeout_s: float | None) -> dict:
    """``python -m xpubench.ceilings`` (ceilings/__main__.py) for one backend and device: its JSON."""
    proc = subprocess.run([sys.executable, "-m", "xpubench.ceilings", "--backend", backend, "--device", device, *argv],
                          capture_output=True, text=True, timeout=timeout_s, check=False,
                          env=dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false"))
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"ceiling measurement of {backend} on {device} failed: {tail}")
    return json.loads(proc.stdout)


def ceilings_for(env: dict[str, Any], backend: str, device: str, precisions: Sequence[str], *,
                 budget_s: float | None = None, with_bandwidth: bool = True, refresh: bool = False,
                 path: Path | None = None) -> dict[str, Any]:
    """The ceilings of one backend and device: from the cache when it holds them for this machine key,
    else measured in a child process and stored. Returns {"ceilings": {precision: Ceiling},
    "bandwidth": Bandwidth | None, "source": "cache" | "measured", "cache_note": why the cache was not
    used, or None, "unkept": why a measurement could not be stored in the cache (an unwritable folder),
    or None: the figures are returned all the same}."""
    key = cache.machine_key(env)
    entry, note = (None, "refresh asked") if refresh else cache.lookup(key, path)
    found = {p: cache.cached_ceiling(entry, backend, device, p) for p in precisions}
    bw = cache.cached_bandwidth(entry, backend, device)
    if entry and all(found.values()) and (bw or not with_bandwidth):
        return {"ceilings": found, "bandwidth": bw, "source": "cache", "cache_note": None, "unkept": None}
    missing = [p for p, c in found.items() if c is None]   # none: the bandwidth alone is measured
    spec = _spec_bandwidth(env, backend, device)
    measured, bw_new = measure_in_subprocess(backend, device, missing, budget_s=budget_s,
                                             with_bandwidth=with_bandwidth and bw is None, spec_bytes_per_s=spec)
    unkept = None
    try:
        cache.store(key, measured, [bw_new] if bw_new else [], path)
    except OSError as exc:   # measured all the same: the caller shows the figures and says why they are not kept
        unkept = f"not kept: the cache {path or cache.cache_path()} cannot be written ({exc.strerror or exc})"
    found.update({c.precision: c for c in measured})
    return {"ceilings": found, "bandwidth": bw or bw_new, "source": "measured",
            "cache_note": note or "this backend, device or precision was not in the cache", "unkept": unkept}


def _spec_bandwidth(env: dict[str, Any], backend: str, device: str) -> float | None:
    for dev in env.get("backends", {}).get(backend, {}).get("devices", []):
        if dev.get("id") == device:
            return dev.get("memory_bandwidth")
    return None
