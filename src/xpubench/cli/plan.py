"""`xpubench run --dry-run [--env-file FILE]`: the cases a run would execute and an estimate of how long it
takes, for this machine or for the one FILE describes (`xpubench env --json` saved there): learnt from what
the same cases, or cases like them, took here before, else modelled (plan/learnt.py), each case saying
which. Nothing runs and nothing is written."""

from __future__ import annotations

from collections import Counter

from rich.table import Table

from xpubench.devices.device import kind_of
from xpubench.plan import engines, estimate
from xpubench.plan.fit import fit_of, memory_lines
from xpubench.plan.learnt import Estimator, basis_counts
from xpubench.results.plaintext import markup
from xpubench.workloads import REGISTRY, get_workload


def machine_summary(env: dict) -> str:
    """"h100-node: torch 8 x NVIDIA H100 80GB HBM3; jax 8 x NVIDIA H100 80GB HBM3" (accelerators only)."""
    parts = []
    for backend, info in env.get("backends", {}).items():
        names = Counter(d.get("name") for d in info.get("devices", []) if kind_of(d.get("kind")).accelerator)
        if names:
            parts.append(f"{backend} " + ", ".join(f"{n} x {name}" for name, n in names.items()))
        for platform, error in (info.get("platform_errors") or {}).items():
            parts.append(f"{backend} {platform} did not load: {error}")
    host = env.get("host", {})
    cpu = (host.get("cpu") or {}).get("model") or "unknown CPU"
    return f"{host.get('hostname') or 'unknown host'}: {'; '.join(parts) or cpu + ' only'}"


def _length(case) -> str:
    if case.mode == "matmul":
        return f"N={case.size}, budget {case.time_budget_s or estimate.MATMUL_BUDGET_S:g} s"
    if case.users:   # a serving point (plan/serve.py)
        o = case.options
        load = f"{case.rate:g} req/s, " if case.rate else ""
        return f"{load}{o['requests']} requests of {o['input_len']} + {o['output_len']} tokens after {o['warmup']}"
    workload = get_workload(case.workload) if case.workload in REGISTRY else None
    if workload is not None and workload.run is not None:   # its own measurement (the selftest): what it does
        options = workload.options_of(case.options)
        return ", ".join(str(getattr(options, k, options.get(k))) for k in workload.key_options)
    if case.mode == "generate" and workload is not None:
        prompt_len, new_tokens = workload.generation_lengths(workload.spec_for(case.options), case.options)
        return f"prompt {prompt_len} + {new_tokens} new"
    epochs = case.epochs if case.epochs else "default"
    if case.options.get("target"):   # a quality target: the epochs are a cap (harness/target.py)
        return f"to target, at most {epochs} epochs"
    return f"{epochs} epochs x {case.steps or 'all'} steps"


def print_plan(planned, console, source: str | None) -> int:
    """``planned`` (an api.Plan: its cases, notes, budget and worker processes) as `--dry-run` prints it."""
    env, processes = planned.environment, planned.processes
    where = f" (from {source})" if source else " (this machine)"
    console.print(f"[bold]Dry run[/bold] for {markup(machine_summary(env))}{markup(where)}: "
                  "nothing runs, nothing is written.",
                  highlight=False, soft_wrap=True)
    for note in planned.notes:
        console.print(f"[yellow]note:[/] {markup(note)}", highlight=False, soft_wrap=True)
    table = Table(title=f"{len(planned.cases)} case(s)", title_justify="left")
    for col in ("#", "case", "batch / N", "devices", "length", f"est. ({processes} proc.)", "from"):
        table.add_column(col, justify="right" if col in ("#", "devices") or col.startswith("est.") else "left",
                         overflow="fold")
    guess = Estimator(env)   # plan/learnt.py: this machine's history, else the model
    estimates = [guess(case) for case in planned.cases]
    for i, (case, est) in enumerate(zip(planned.cases, estimates), 1):
        size = f"N={case.size}" if case.size else f"{case.users} users" if case.users else (
            str(case.batch_size) if case.batch_size else "-")
        fit = fit_of(case, env)
        skipped = "see below" if engines.refusal(case) else "memory" if fit is not None and fit.fits is False else ""
        table.add_row(str(i), markup(case.key), size, str(case.devices), _length(case),
                      f"skipped: {skipped}" if skipped else estimate.describe(est.seconds * processes)
                      + ("" if est.known else " +?"), "" if skipped else est.source())
    console.print(table)
    for i, case in enumerate(planned.cases, 1):   # plan/engines.py: a format or checkpoint an engine can't load
        if engines.refusal(case):
            console.print(f"#{i} skipped: {engines.refusal(case)}", markup=False, highlight=False, soft_wrap=True)
    for line in memory_lines(planned.cases, env):   # plan/fit.py: a case that does not fit is skipped
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    total, unknown = sum(e.seconds for e in estimates), sum(not e.known for e in estimates)
    modelled = all(e.basis == "modelled" for e in estimates)
    console.print(f"estimated time: about {estimate.describe(total * processes)} ({processes} worker process(es) "
                  f"per case; {basis_counts(estimates)})"
                  + (f" plus the work of {unknown} case(s) whose chip has no known peak at their precision (+?)"
                     if unknown else "")
                  + (" (modelled, rough: worker start-up, compilation, time budgets and analytic FLOPs at an assumed "
                     "share of the peak; docs/accelerators.md, \"What the estimate assumes\", says how rough; the "
                     "machine's own runs teach the next estimate)" if modelled else
                     " (learnt: each such case's newest processes here, or the model scaled by cases like it; "
                     "docs/accelerators.md, \"What the estimate assumes\")"), highlight=False, soft_wrap=True)
    note = estimate.budget_note(planned.cases, guess.seconds, planned.budget_s, processes)
    if note:
        console.print(f"budget: {note}", markup=False, highlight=False, soft_wrap=True)
    return 0
