"""Data-parallel device counts of a plan: how many devices of a kind a backend can use here (over every
process of a multi-host run) and the counts N a request asks for (--devices, --scaling)."""

from __future__ import annotations

from typing import Any

from xpubench import backends
from xpubench.devices.device import kind_of
from xpubench.errors import UserError


def processes() -> int:
    """How many processes the run in progress spans (its launcher's world: launch/launchers/): 1 unless
    it spans several hosts."""
    from xpubench.launch.launchers import active

    return active().world.num_processes


def available_count(env: dict, backend: str, device: str) -> int:
    """How many devices of this kind data parallelism can use (the backend's own count where it has one:
    torch on a CPU runs one process per core), over all processes of a multi-process run (each process is
    taken to have as many as this one)."""
    have = backends.record(backend).data_parallel_devices(env, device)
    if have is None:
        devs = env.get("backends", {}).get(backend, {}).get("devices", [])
        have = max(1, sum(1 for d in devs if kind_of(d["kind"]) == kind_of(device)))
    return have * processes()


def device_counts(req: Any, env: dict, backend: str, device: str) -> list[int]:
    """The data-parallel device counts N of the request (a plan.PlanRequest): --devices, or N = 1, 2, 4, ...
    with --scaling (with P processes: multiples of P, P devices at least). Refuses more than there are (one
    line)."""
    have, spans = available_count(env, backend, device), processes()
    if req.scaling:
        counts, n = [], spans
        while n <= have:
            counts.append(n)
            n *= 2
        return counts + ([have] if counts[-1] != have else [])
    default = [0] if spans > 1 else [1]   # several processes: every device of every process
    counts = [have if n == 0 else n for n in (req.device_counts or default)]
    kind = kind_of(device)
    for n in counts:
        if n > have:
            hint = backends.record(backend).data_parallel_hint(device)
            raise UserError(f"--devices {n}: {backend} sees only {have} {kind} device(s) here; "
                            f"use --devices {have} or --devices all{hint}")
        if n % spans:
            raise UserError(f"--devices {n} does not split evenly over {spans} processes: "
                            f"use a multiple of {spans}")
    return counts
