"""The sweep: validated cases from CLI flags, a TOML file or a Python call.

A *case* is one workload x backend x device x mode x precision x batch size (or matrix size) x device
count. Everything the worker needs is in the Case; nothing is read from globals. ``build_cases`` checks the
request first (plan/validation.py), then expands it against what is installed and present.
"""

from __future__ import annotations

import dataclasses

from xpubench.backends import record, supports
from xpubench.case import SERVE, Case
from xpubench.devices.device import is_accelerator
from xpubench.errors import UserError
from xpubench.plan import engines, prices, serve, target
from xpubench.plan.defaults import (  # noqa: F401 - re-exported: the plan's names in one place
    backend_ids,
    choose_devices,
    default_backends_here,
    default_batch_sizes,
    expand_backends,
    has_tf32,
    matmul_dtypes,
    model_precisions,
    quick_steps,
    slow_cpu_dtypes,
)
from xpubench.plan.devices import available_count, device_counts, processes  # noqa: F401 - re-exported
from xpubench.plan.readable import readable
from xpubench.plan.request import PlanRequest, is_brief, is_quick, workloads_of
from xpubench.plan.resolve import for_backend, pinned, resolve_paths
from xpubench.plan.validation import check_one_step, validate
from xpubench.workloads import get_workload, option_rows
from xpubench.workloads.base import Workload

WEIGHT_ONLY = ("int8", "int4")   # inference precisions; int4 only where the workload's generation models own
#                                  their weight formats (llama: workloads/llama/costs.py FORMATS)
MATMUL_SIZES = (1024, 2048, 4096)
MATMUL_SIZES_ACCEL = (1024, 2048, 4096, 8192)
# the brief default run (`xpubench run` with no workload): a few measured steps each, < 3 min on 2 cores
# (steps per epoch: plan/defaults.quick_steps, more on accelerators)
QUICK = {"epochs": 3, "eval_batches": 2, "matmul_sizes": (1024, 2048),
         "matmul_sizes_accel": (1024, 4096, 8192), "matmul_budget_s": 1.0, "generate_budget_s": 2.0}


def _unique(values):
    """Drop repeats, keep the order: a case listed twice would run twice under one run_id."""
    return list(dict.fromkeys(values)) if values else values


def build_cases(req: PlanRequest, env: dict) -> list[Case]:
    """Expand a request into cases, validating every name against what is installed and present."""
    validate(req)
    req = dataclasses.replace(
        req, quick=is_quick(req), workloads=_unique(req.workloads),
        backends=_unique(expand_backends(env, req.backends)), devices=_unique(req.devices),
        precisions=_unique(req.precisions), modes=_unique(req.modes),
        batch_sizes=sorted(set(req.batch_sizes)) if req.batch_sizes else req.batch_sizes,  # ascending: an
        sizes=sorted(set(req.sizes)) if req.sizes else req.sizes,  # OOM at B skips the larger ones after it
        device_counts=_unique(req.device_counts))
    req = resolve_paths(req)   # data_dir, --save-weights: absolute, in one place (plan/resolve.py)
    workloads = workloads_of(req, processes())
    backends = req.backends or default_backends_here(env)
    cases: list[Case] = _model_cases(req, env) if req.model else []
    if SERVE in (req.modes or []):   # a server under load: its points, planned apart (plan/serve.py)
        cases += serve.serve_cases(req, env, [get_workload(w) for w in workloads])
        req = dataclasses.replace(req, modes=[m for m in req.modes if m != SERVE])
        backends = backends if req.modes else []   # serve alone: no other case to plan
    for backend, devices in (choose_devices(env, backends, req.devices, implicit=not req.backends).items()
                             if backends else ()):
        for device in devices:
            if req.device_counts:
                device_counts(req, env, backend, device)  # more devices than exist: refused up front
            for workload in workloads:
                cases += prices.priced(_cases_for(req, env, get_workload(workload), backend, device), req.prices)
    if not cases:
        raise UserError("the sweep is empty: no workload runs on the chosen backends (numpy runs matmul only); "
                        "add -b torch or -b jax, or choose -w matmul")
    unique: dict[str, Case] = {}
    for case in cases:  # each case once (a repeated behaviour or size would run twice under one run_id)
        unique.setdefault(case.run_id, case)
    cases = list(unique.values())
    for case in cases:
        readable(case)
    check_one_step(cases)   # --train-samples below one global batch (plan/validation.py)
    engines.check(cases)   # a format an engine lacks, a checkpoint it can't convert (plan/engines.py)
    return brief_cases(req, env, cases) if is_brief(req) else cases


def brief_cases(req: PlanRequest, env: dict, cases: list[Case]) -> list[Case]:
    """The brief default run's cases out of the full brief sweep (plan/brief.py), fitted to the budget."""
    from xpubench.plan import brief

    chosen = brief.select(cases, *brief.budget(req, env))
    return sorted(chosen or cases[:1], key=lambda c: not is_accelerator(c.device))   # the accelerator first


def _model_cases(req: PlanRequest, env: dict) -> list[Case]:
    """A user's model (--model FILE.py:FUNCTION): its workload, backends and options (plan/usermodel.py),
    then the same cases as a built-in workload's."""
    from xpubench.plan.usermodel import model_plan

    planned = model_plan(req, env)
    return [case for backend, native in planned.backends.items()
            for device in choose_devices(env, [native], req.devices, implicit=False)[native]
            for case in _cases_for(req, env, planned.record, backend, device, planned.options)]


def _cases_for(req: PlanRequest, env: dict, workload: Workload, backend: str, device: str,
               model_options: dict | None = None) -> list[Case]:
    """The cases of one workload on one backend and device: none where the backend has no model of the
    workload (``backends.supports``; a user's model was matched to its backends by plan/usermodel.py)."""
    if workload.run is not None:   # its own measurement (the selftest): one case per options dict
        per_case = workload.case_options(req.options) if workload.case_options else [dict(req.options)]
        mode = workload.modes[0]
        return [Case(workload=workload.name, backend=backend, device=device, mode=mode, seed=req.seed,
                     batch_size=bs, options=workload.options_of(opts), key_options=workload.key_options)
                for opts in per_case for bs in (req.batch_sizes or default_batch_sizes(workload, None, mode))]
    others = {row.key for name, row in option_rows() if row.selects and name != workload.name}
    others -= {row.key for row in workload.options}   # a key it shares (gpt's and llama's --preset) stays
    chosen = any(row.selects and row.key in req.options for row in workload.options)   # --preset, --weights
    quick = dict(workload.quick_options) if req.quick and not chosen else {}
    options = quick | {k: v for k, v in req.options.items() if k not in others} | (model_options or {})
    options = workload.options_of(pinned(workload, options))   # --weights pinned, once (plan/resolve.py)
    common = {"workload": workload.name, "backend": backend, "device": device, "seed": req.seed,
              "compile": req.compile, "time_budget_s": req.time_budget_s, "options": options,
              "key_options": workload.key_options}
    if workload.kind == "matmul":
        accel = is_accelerator(device)
        sizes = req.sizes or list(MATMUL_SIZES_ACCEL if accel else MATMUL_SIZES)
        if req.quick:
            sizes = req.sizes or list(QUICK["matmul_sizes_accel"] if accel else QUICK["matmul_sizes"])
            common["time_budget_s"] = req.time_budget_s or QUICK["matmul_budget_s"]
        precisions = req.precisions or matmul_dtypes(env, backend, device)
        precisions = [p for p in precisions if p not in WEIGHT_ONLY]
        return [Case(mode="matmul", precision=p, size=n, **common) for p in precisions for n in sizes]
    if workload.kind != "user" and not supports(backend, workload):
        return []  # no model for this backend (numpy has none: it is the matmul reference; gpt has no Keras one)
    spec = workload.spec_for(options)
    precisions = req.precisions or workload_precisions(env, workload, backend, device, req.quick,
                                                       req.modes or list(workload.default_modes))
    # asking for int8 asks for an inference comparison: its fp32/bf16 siblings run inference too
    precisions = [p for p in precisions if p != "int4" or workload.generation_models]
    modes = req.modes or (["infer"] if set(WEIGHT_ONLY) & set(precisions) else list(workload.default_modes))
    counts = device_counts(req, env, backend, device)
    epochs, steps = req.epochs, req.steps
    train_samples, eval_samples = req.train_samples, req.eval_samples
    if req.quick:
        epochs = epochs or QUICK["epochs"]
        steps = steps or quick_steps(device)   # pipelined accelerator epochs need more (plan/defaults.py)
    cases = []
    for precision in precisions:
        for asked in (["infer"] if precision in WEIGHT_ONLY else modes):
            if target.loop_mode(asked) not in workload.modes:
                continue   # a mode the workload does not declare
            mode = workload.case_mode(target.loop_mode(asked))   # time-to-target: the training loop
            brief = req.quick and mode == "generate" and not req.time_budget_s   # a brief generation: 2 s measured
            length = dict(common, time_budget_s=QUICK["generate_budget_s"]) if brief else common
            # the epochs, and a target's options (target, eval_every), of this mode (plan/target.py)
            fields = length | target.case_fields(req, asked, workload, spec, epochs, options)
            sizes = req.batch_sizes or default_batch_sizes(workload, spec, mode, device, req.quick,
                                                           target.trains_to_target(req, asked))
            # a generation case per value of the workload's swept options (llama's --depth; --decode: torch's only)
            swept = workload.case_options(fields["options"]) if mode == "generate" and workload.case_options else \
                [fields["options"]]
            swept = {repr(sorted(o.items())): o for o in (for_backend(workload, backend, o) for o in swept)}
            for n, bs, opts in ((n, bs, o) for n in counts for bs in sizes for o in swept.values()):
                cases.append(Case(
                    mode=mode, precision=precision, batch_size=bs, devices=n,
                    steps=steps, train_samples=train_samples or (bs * n * steps if req.quick else None),
                    eval_samples=eval_samples or (bs * n * QUICK["eval_batches"] if req.quick else None),
                    data=req.data, data_dir=req.data_dir, **(fields | {"options": workload.options_of(opts)})))
    return cases


def workload_precisions(env: dict, workload: Workload, backend: str, device: str, quick: bool = False,
                        modes: list[str] = ("infer",)) -> list[str]:
    """A workload's precisions when none is asked for: for inference, its own defaults (llama's weight
    formats) less the half dtypes this CPU computes slowly (``slow_cpu_dtypes``; plan_notes says so) and, for
    an engine, those it has no format of, the first of them only in the brief default run; else the device's
    model defaults (``model_precisions``)."""
    if not workload.default_precisions or "infer" not in modes:
        return model_precisions(env, backend, device)
    slow = slow_cpu_dtypes(env, backend, device)
    engine = record(backend) if record(backend).kind == "engine" else None   # only the formats it has
    precisions = [p for p in workload.default_precisions if p not in slow and (engine is None or p in engine.formats)]
    return precisions[:1] if quick else precisions
