"""What the plan says once before the run (``plan_notes``): environment variables that silently change
what the planned devices measure, a CPU library running kernels below the CPU, the default backends
left out (a module missing), the serve sweep's notes, what the brief run left out and the flag that
plans it, a big model's CPU cases on an accelerator node, and the precisions left out on purpose (half
dtypes this CPU has no instructions for, Apple's emulated bf16). The cases themselves are
plan/__init__.py's ``build_cases``."""

from __future__ import annotations

import dataclasses

from xpubench.case import SERVE, Case
from xpubench.devices.device import is_cpu, kind_of
from xpubench.plan import build_cases, serve
from xpubench.plan.defaults import half_precision_note, left_out_backends, slow_cpu_dtypes
from xpubench.plan.request import PlanRequest, is_brief, is_quick
from xpubench.workloads import REGISTRY, get_workload


def plan_notes(req: PlanRequest, env: dict, cases: list[Case], environ: dict | None = None) -> list[str]:
    """Said once before the run: environment variables that silently change what the planned devices
    measure (``environ``: this process's; by default the ones the environment record carries), a CPU
    library running kernels below the CPU (devices/kernels.py), and what the default sweep left out on
    purpose."""
    from xpubench.devices import envvars, kernels

    variables = environ if environ is not None else env.get("variables") or {}
    notes = ([] if req.backends else left_out_backends(env)) + envvars.plan_warnings(
        variables, {kind_of(c.device).name for c in cases})   # a default backend a module is missing for
    notes += serve.notes(req)
    if is_brief(req):   # what the brief run left out, and the flag that plans it (plan/brief.py)
        from xpubench.plan.brief import budget, left_out_line

        full = build_cases(dataclasses.replace(req, all_cases=True), env)
        notes += [line for line in [left_out_line(full, cases, *budget(req, env))] if line]
    on_cpu = {c.backend for c in cases if is_cpu(c.device)}
    notes += [f"{f.sentence()} (recorded in every result; `xpubench doctor` measures what it costs)" for f in
              kernels.findings(env.get("kernels"), ((env.get("host") or {}).get("cpu") or {}).get("flags"), variables)
              if f.backend in on_cpu]
    if not req.devices:   # the CPU cases of a big model on an accelerator node: hours nobody asked for
        from xpubench.plan.estimate import cpu_share_hint

        notes += [hint for hint in [cpu_share_hint(cases, env)] if hint]
    if req.precisions:
        return notes
    for backend, device in dict.fromkeys((c.backend, c.device) for c in cases if c.mode == "matmul"
                                         and not is_brief(req)):   # the brief run's line says what it left out
        slow = slow_cpu_dtypes(env, backend, device)
        if slow:
            notes.append(f"{backend} {device}: {', '.join(slow)} matmul left out (this CPU has no native "
                         f"{'/'.join(slow)} instructions: ~1 GFLOP/s, minutes per product); "
                         f"ask for it with --precision {slow[0]}")
    for name, backend, device in dict.fromkeys((c.workload, c.backend, c.device) for c in cases
                                               if c.mode in ("infer", "generate") and c.workload in REGISTRY
                                               and not is_quick(req)):
        slow = [p for p in get_workload(name).default_precisions if p in slow_cpu_dtypes(env, backend, device)]
        if slow:   # llama's weight formats (workload_precisions)
            notes.append(f"{name} {backend} {device}: {', '.join(slow)} left out (this CPU has no native "
                         f"{'/'.join(slow)} instructions: {backend} computes it at ~1 GFLOP/s); ask for it with "
                         f"--precision {slow[0]}")
    for backend, device in dict.fromkeys((c.backend, c.device) for c in cases if c.mode not in ("matmul", SERVE)):
        half = half_precision_note(env, backend, device)   # Apple M1/M2: bf16 emulated (devices/precisions.py)
        if half:
            notes.append(half)
    return notes
