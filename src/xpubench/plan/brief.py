"""The brief default run (`xpubench run` with no -w): the few cases its answer compares, each in at least
``MIN_PROCESSES`` worker processes within the run's budget, and one line saying what it left out.

The answer of a run compares, per workload, the fastest backend/device against the next one, with an
interval over the worker processes: with one process a side that comparison is "provisional". So the
150 s are spent on fewer cases, each run twice or more, chosen in this order (``PRIORITY``) while two
processes of every chosen case fit the budget by the plan's estimates (plan/estimate.py; the run
re-plans from what the processes take, launch/budget.py):

1. llama generation (pp and tg, the model's share of its bandwidth bound): what most people run, each
   framework at its best (torch's decode step compiled, as ``-w llama``'s; docs/workloads.md);
2. matmul at one size (N=2048 on a CPU, the largest brief size on an accelerator), fp32 on a CPU, fp32
   and the chip's 16-bit format (bf16, else fp16) on an accelerator: the chip's compute, each framework's
   BLAS;
3. mnist_cnn training: the classic small CNN, every framework's training loop;
4. gpt training: a small transformer, where the budget leaves room (a faster machine).

Accelerator cases come first, every one of them before the CPU's; with an accelerator present the CPU
runs its matmul only (its reference point). Everything else the full default sweep holds (the other
training workloads, the other matrix sizes and CPU dtypes) is left out and named in one line, with the
flag that plans it: ``--all``. A case of a comparison the run keeps that does not fit the budget by its
estimate is named apart, with the estimate: its row is neither measured nor in the answer (a generation
case stands alone, against its bandwidth bound, when the other side does not fit).
"""

from __future__ import annotations

from collections.abc import Callable

from xpubench.case import Case
from xpubench.devices.device import is_accelerator, kind_of
from xpubench.results.modes import mode_of

MIN_PROCESSES = 2
PRIORITY = ("llama", "matmul", "mnist_cnn", "gpt")
CPU_WITH_ACCELERATOR = ("matmul",)     # the CPU's brief share when an accelerator is planned
CPU_MATMUL = (2048, "fp32")            # the CPU's one matmul case per backend
OVERHEAD_S = 15.0                      # detection, the brief bandwidth and the closing output (2-core VM: ~10 s)
FLAG = "--all"
LISTED = 6                             # items named per kind in the left-out line, the rest counted


def _matmul_kept(case: Case, sizes_on_device: dict[str, list[int]], dtypes: dict[tuple, set]) -> bool:
    if is_accelerator(case.device):   # fp32 and the chip's 16-bit format (bf16, else fp16) at the largest size
        half = "bf16" if "bf16" in dtypes[(case.backend, case.device)] else "fp16"
        return case.size == max(sizes_on_device[case.device]) and case.precision in ("fp32", half)
    size, precision = CPU_MATMUL
    wanted = size if size in sizes_on_device[case.device] else max(sizes_on_device[case.device])
    return case.size == wanted and case.precision == precision


def budget(req, env: dict) -> tuple[float, Callable[[Case], float]]:
    """The brief run's budget (plan/request.py ``budget_s``: ``--budget``, else the brief run's) and the
    estimate it admits cases by (seconds of one worker process, plan/estimate.py)."""
    from xpubench.plan.estimate import case_seconds
    from xpubench.plan.request import budget_s

    return budget_s(req), lambda c: case_seconds(c, env)[0]


def candidates(cases: list[Case]) -> list[Case]:
    """The cases of the full brief sweep a brief run may keep, in the order they are admitted: accelerator
    cases first, then by ``PRIORITY``, then in plan order."""
    accelerated = any(is_accelerator(c.device) for c in cases)
    sizes: dict[str, list[int]] = {}
    dtypes: dict[tuple, set] = {}
    for c in cases:
        if c.mode == "matmul":
            sizes.setdefault(c.device, []).append(c.size)
            dtypes.setdefault((c.backend, c.device), set()).add(c.precision)

    def kept(c: Case) -> bool:
        if c.workload not in PRIORITY:
            return False
        if accelerated and not is_accelerator(c.device) and c.workload not in CPU_WITH_ACCELERATOR:
            return False
        return c.mode != "matmul" or _matmul_kept(c, sizes, dtypes)

    order = {c.run_id: i for i, c in enumerate(cases)}
    return sorted((c for c in cases if kept(c)),
                  key=lambda c: (not is_accelerator(c.device), PRIORITY.index(c.workload), order[c.run_id]))


def select(cases: list[Case], budget_s: float, estimate: Callable[[Case], float],
           processes: int = MIN_PROCESSES) -> list[Case]:
    """The brief run's cases: ``candidates`` admitted a comparison at a time (a workload and mode on the
    accelerators, then on the CPU: all its backends and devices, else as many as fit if that is 2 or more,
    else none: one side alone compares nothing, but a generation's, which its bandwidth bound measures
    (``alone``)) while ``processes`` of each fit in ``budget_s`` less ``OVERHEAD_S`` and the budget's
    reserve, by ``estimate`` (seconds of one process). A comparison that does not fit is passed over for
    cheaper ones after it. Plan order is kept."""
    from xpubench.launch.budget import RESERVE_S

    room = budget_s - OVERHEAD_S - RESERVE_S
    groups: dict[tuple, list[Case]] = {}
    for case in candidates(cases):
        groups.setdefault((is_accelerator(case.device), case.workload, case.mode), []).append(case)
    chosen: set[str] = set()
    for group in groups.values():
        taken, need = [], 0.0
        for case in sorted(group, key=estimate):   # the cheapest first: as many sides as fit
            cost = processes * estimate(case)
            if need + cost <= room:
                taken.append(case)
                need += cost
        if len(taken) == len(group) or len(taken) >= 2 or (taken and alone(taken[0])):
            chosen.update(c.run_id for c in taken)
            room -= need
    return [c for c in cases if c.run_id in chosen]


def alone(case: Case) -> bool:
    """Whether one side of the case's comparison means something without the other: a generation's figure
    against its memory bandwidth bound (results/modes.py ``bandwidth_bound``)."""
    mode = mode_of(case.mode)
    return bool(mode and mode.bandwidth_bound)


def _what(case: Case, accelerated: bool) -> tuple[str, str]:
    """(kind, item) of a left-out case: ("matmul", "N=1024"), ("training", "fashion_cnn")."""
    where = f" on {kind_of(case.device)}" if accelerated else ""
    if case.mode == "matmul":
        return "matmul", (f"N={case.size}" if case.precision == "fp32" else f"{case.backend} {case.precision}") + where
    return {"train": "training", "infer": "inference", "generate": "generation"}.get(case.mode, case.mode), \
        case.workload + where


def left_out_line(full: list[Case], kept: list[Case], budget_s: float | None = None,
                  estimate: Callable[[Case], float] | None = None) -> str | None:
    """One line: what the brief run left out of the full sweep and the flag that plans it, then the cases
    of its comparisons that did not fit ``budget_s`` by ``estimate`` (seconds of one process; either
    missing: they are listed with the rest), or None."""
    from xpubench.plan.estimate import describe

    kept_ids = {c.run_id for c in kept}
    out = [c for c in full if c.run_id not in kept_ids]
    if not out:
        return None
    priced = budget_s is not None and estimate is not None
    over = [c for c in candidates(full) if c.run_id not in kept_ids] if priced else []
    accelerated = any(is_accelerator(c.device) for c in full)
    kinds: dict[str, dict[str, None]] = {}
    for c in out:
        if c not in over:
            kind, item = _what(c, accelerated)
            kinds.setdefault(kind, {}).setdefault(item)
    said = "; ".join(f"{kind} {', '.join(list(items)[:LISTED])}"
                     + (f" +{len(items) - LISTED}" if len(items) > LISTED else "")
                     for kind, items in kinds.items())
    line = f"brief run: {len(kept)} cases, {MIN_PROCESSES}+ processes each"
    if kinds:
        line += f"; left out {len(out) - len(over)} ({said}): `xpubench run {FLAG}` runs them"
    if over:
        named = ", ".join(f"{c.workload} {c.mode} on {c.backend} {c.device}" + (
            f" {c.precision}" if c.precision != "fp32" else "") + f" (est. {describe(estimate(c))} a process)"
            for c in over[:LISTED]) + (f" +{len(over) - LISTED}" if len(over) > LISTED else "")
        line += (f"; not measured, as {MIN_PROCESSES} processes of each do not fit the {budget_s:g} s budget with the "
                 f"rest (`--budget` gives more): {named}")
    return line
