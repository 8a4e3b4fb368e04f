"""A rough estimate of how long a planned run takes (``xpubench run --dry-run``), case by case.

It is a plan, never a measurement, and says what it assumes:

- every case starts a worker process: Python plus the framework's import (each backend record's
  ``startup_s``, measured on the project's 2-core CI VM; a faster host starts faster; a worker forked by
  a fork server, launch/forkserver.py, starts faster after the first: the estimate errs long there);
- compilation: each backend record's ``compile_seconds(case)`` (JAX compiles each step ahead of time,
  1.7-2.8 s measured for the CNN on that VM; ``torch.compile``, compile="auto" on CUDA/ROCm, 18-33 s
  measured on CPU with a cold cache; docs/measured-facts.md);
- work runs at an assumed share of the chip's peak: ``MATMUL_EFFICIENCY`` for matmul, ``MODEL_MFU`` for
  model training and inference (on the CPU VM the CNNs measured 6-9% MFU; accelerators on these small
  models are assumed no better);
- a time budget caps what it caps (matmul windows, inference measurement, training epochs);
- a serving point: its worker's start, and its --duration with one request's time limit where given (its
  requests take what the server takes, unknown before it ran: the run's history learns it, plan/learnt.py);
- a chip without a peak for the case's precision (unknown to the table, or fp32 on a TPU) gets no
  work estimate: only its bounded parts count (a matmul's budget bounds it whatever the chip) and the
  total says how many cases that is.
"""

from __future__ import annotations

import math

from xpubench import backends
from xpubench.backends.peaks import device_record, peak_for
from xpubench.case import SERVE
from xpubench.devices.device import is_accelerator, is_cpu, kind_of
from xpubench.plan.fit import refusal
from xpubench.workloads import get_workload, matmul

MATMUL_EFFICIENCY = 0.5
MODEL_MFU = 0.07
MATMUL_BUDGET_S = 6.0        # workloads/matmul.py DEFAULT_BUDGET_S
MATMUL_WINDOWS = 12          # 2 warm-up calls, ~3 calibration windows, 7 measured windows
INFER_BUDGET_S = 10.0        # harness/inference.py DEFAULT_BUDGET_S
CPU_BANDWIDTH = 10e9         # B/s a CPU's decode is assumed to read at (the 2-core VM: 6-18 GB/s STREAM)
SETUP_BYTES_PER_S = 0.3e9    # a generation model's weights drawn at random (or read) and placed, per second


def _peak(case, env: dict) -> float | None:
    fp = {"host": env.get("host", {}), "backends": env.get("backends", {})}
    peak, _ = peak_for(fp, case.backend, case.device, case.precision)
    return peak * (1 if kind_of(case.device).shared else case.devices) if peak else None


def _compile_s(case) -> float:
    return backends.record(case.backend).compile_seconds(case)


def case_seconds(case, env: dict) -> tuple[float, bool]:
    """(estimated seconds for one case, whether its work part is known). An unknown peak leaves only
    start-up, compilation and the parts a time budget bounds."""
    if refusal(case, env):   # skipped before it starts: it can't fit its device's memory (plan/fit.py)
        return 0.0, True
    start = backends.record(case.backend).startup_seconds(case.backend)
    if case.mode == SERVE:   # its requests take what the server takes: known only as a --duration bounds it
        duration = case.options.get("duration_s")
        return (start + duration + case.options["request_timeout_s"], True) if duration else (start, False)
    peak = _peak(case, env)
    if case.mode == "matmul":
        budget = case.time_budget_s or MATMUL_BUDGET_S
        if not peak:
            return start + budget, True       # the windows stop at the budget, whatever the chip
        product = matmul.flops(case.size) / (peak * MATMUL_EFFICIENCY)
        return start + min(budget, MATMUL_WINDOWS * max(0.05, product)) + 3 * product, True
    if case.options.get("model"):   # a user's model: its FLOPs are measured in its worker, unknown here
        bounded = case.time_budget_s or (INFER_BUDGET_S if case.mode == "infer" else 0.0)
        return start + _compile_s(case) + bounded, case.mode == "infer" or bool(case.time_budget_s)
    workload = get_workload(case.workload)
    if workload.run is not None:   # its own measurement (the selftest)
        return start, True
    spec = workload.spec_for(case.options)   # gpt's preset and sizes
    forward = workload.forward_flops(spec)
    global_batch = case.global_batch   # resolved: the case has it (case.py)
    per_epoch = (case.train_samples or spec.train_samples) // global_batch
    steps = min(case.steps or per_epoch, per_epoch)
    epochs = case.epochs or spec.epochs
    evals = case.eval_samples or spec.eval_samples
    train_flops = epochs * steps * global_batch * forward * spec.train_flops_factor
    fixed = start + _compile_s(case)
    if case.mode == "generate":   # no training: set-up, the first and warm-up rounds, then the budget
        return fixed + generation_seconds(case, env, workload, spec, peak), True
    if case.mode == "infer":
        bounded = case.time_budget_s or INFER_BUDGET_S
        return (fixed + bounded + train_flops / (peak * MODEL_MFU), True) if peak else (fixed + bounded, False)
    if not peak:
        return fixed + (case.time_budget_s or 0.0), bool(case.time_budget_s)   # a budget bounds the work
    work = (train_flops + epochs * evals * forward) / (peak * MODEL_MFU)
    return fixed + (min(work, case.time_budget_s) if case.time_budget_s else work), True


def generation_seconds(case, env: dict, workload, spec, peak: float | None) -> float:
    """A generation case's work after its worker started. Without the workload's counts (gpt): its
    measuring budget. With them (llama): the weights set up (the case's memory at ``SETUP_BYTES_PER_S``),
    then rounds (harness/generation.py: a first and a warm-up round, then at least 2, at most 20, for
    about the budget), each a prefill at ``MODEL_MFU`` of the peak and new_tokens - 1 decode steps
    reading their bytes at the device's spec bandwidth (a CPU without one: ``CPU_BANDWIDTH``)."""
    budget = case.time_budget_s or INFER_BUDGET_S
    if workload.generation_counts is None:
        return budget
    prompt_len, new_tokens = workload.generation_lengths(spec, case.options)
    batch = case.batch_size
    counts = workload.generation_counts(spec, batch, prompt_len, new_tokens, case.precision)
    bandwidth = device_record(env, case.backend, case.device).get("memory_bandwidth") or (
        None if is_accelerator(case.device) else CPU_BANDWIDTH)
    prefill = counts["prefill_flops"] / (peak * MODEL_MFU) if peak else 0.0
    step = counts["decode_bytes_per_token"] * batch / bandwidth if bandwidth else 0.0
    one = prefill + (new_tokens - 1) * step
    measured = min(20 * one, max(2 * one, min(budget, max(5 * one, budget / 2))))
    need = workload.memory_needed(spec, case) if workload.memory_needed else None
    return (need.total / SETUP_BYTES_PER_S if need else 0.0) + 2 * one + measured


def plan_seconds(cases, env: dict) -> tuple[float, int]:
    """(total estimated seconds, how many cases have no work estimate)."""
    total, unknown = 0.0, 0
    for case in cases:
        seconds, known = case_seconds(case, env)
        total += seconds
        unknown += not known
    return total, unknown


def describe(seconds: float) -> str:
    if seconds < 90:
        return f"{math.ceil(seconds)} s"
    if seconds < 5400:
        return f"{math.ceil(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def budget_note(cases, estimate, budget_s: float | None, processes: int) -> str | None:
    """One sentence for ``--dry-run``: what the run's budget would leave out if every worker process took
    its estimate (``estimate``: a case -> seconds, plan/learnt.py; the run itself re-plans from what the
    processes measure)."""
    from xpubench.launch.budget import preview

    if not budget_s:
        return None
    ran, skipped = preview(cases, processes, budget_s, estimate)
    fewer = sum(1 for n in ran.values() if n < processes)
    if not skipped and not fewer:
        return f"the run's {budget_s:g} s budget fits every case at these estimates"
    said = [f"{len(skipped)} case(s) skipped ({', '.join(skipped[:3])}{', ...' if len(skipped) > 3 else ''})"
            if skipped else "", f"{fewer} case(s) with fewer than {processes} processes" if fewer else ""]
    return (f"the run's {budget_s:g} s budget would leave out, at these estimates: "
            f"{' and '.join(s for s in said if s)}; the run re-plans from what each case measures")


CPU_SHARE_HINT = 0.5          # the CPU's cases take at least this share of the estimate ...
CPU_SECONDS_HINT = 600.0      # ... and at least this long: the plan says how to leave them out


def cpu_share_hint(cases, env: dict) -> str | None:
    """A plan with accelerator cases whose CPU cases take most of its estimated time (an 8B model
    generating on a GPU node's CPU: hours) says so and names the ``-d`` that plans the accelerator alone;
    None otherwise. Said only where the user named no device (plan_notes)."""
    accelerators = sorted({kind_of(c.device).name for c in cases if is_accelerator(c.device)})
    on_cpu = [c for c in cases if is_cpu(c.device)]
    if not on_cpu or not accelerators:
        return None
    cpu_s = sum(case_seconds(c, env)[0] for c in on_cpu)
    total, _ = plan_seconds(cases, env)
    if cpu_s < CPU_SECONDS_HINT or cpu_s < CPU_SHARE_HINT * total:
        return None
    named = ",".join(accelerators)
    return (f"{len(on_cpu)} of the {len(cases)} cases run on the CPU and take {cpu_s / total:.0%} of the estimated "
            f"time ({describe(cpu_s)} of {describe(total)}, one process each): `-d {named}` plans the "
            f"{'/'.join(a.upper() for a in accelerators)} alone (`-d cpu,{named}` keeps both without this note)")
