"""Data-parallel device counts of a plan: how many devices of a kind a backend can use here (over every
process of a multi-host run) and the counts N a request asks for (--devices, --scaling)."""

from __future__ import annotations

from typing import Any

from xpubench.errors import UserError


def _cluster():
    """This run's processes (--num-processes; harness/cluster.py): 1 unless it spans several hosts."""
    from xpubench.harness.cluster import from_env

    return from_env()


def available_count(env: dict, backend: str, device: str) -> int:
    """How many devices of this kind data parallelism can use (torch on CPU: one process per core),
    over all processes of a multi-process run (each process is taken to have as many as this one)."""
    import os

    kind = device.split(":")[0]
    if backend == "torch" and kind == "cpu":
        usable = env.get("host", {}).get("cpu", {}).get("usable_cores")   # the described machine's
        have = usable or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    else:
        devs = env.get("backends", {}).get(backend, {}).get("devices", [])
        have = max(1, sum(1 for d in devs if d["kind"] == kind))
    return have * _cluster().num_processes


def device_counts(req: Any, env: dict, backend: str, device: str) -> list[int]:
    """The data-parallel device counts N of the request (a plan.PlanRequest): --devices, or N = 1, 2, 4, ... with --scaling
    (with P processes: multiples of P, P devices at least). Refuses more than there are (one line)."""
    have, processes = available_count(env, backend, device), _cluster().num_processes
    if req.scaling:
        counts, n = [], processes
        while n <= have:
            counts.append(n)
            n *= 2
        return counts + ([have] if counts[-1] != have else [])
    default = [0] if processes > 1 else [1]   # several processes: every device of every process
    counts = [have if n == 0 else n for n in (req.device_counts or default)]
    kind = device.split(":")[0]
    for n in counts:
        if n > have:
            hint = (" (simulate N CPU devices with XLA_FLAGS=--xla_force_host_platform_device_count=N)"
                    if backend == "jax" and kind == "cpu" else "")
            raise UserError(f"--devices {n}: {backend} sees only {have} {kind} device(s) here; "
                            f"use --devices {have} or --devices all{hint}")
        if n % processes:
            raise UserError(f"--devices {n} does not split evenly over {processes} processes: "
                            f"use a multiple of {processes}")
    return counts
