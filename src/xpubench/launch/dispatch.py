"""One case, measured: the measuring loop is picked here, by the case's mode, and fed the adapters its
backend supplies (backends/base.py). Every loop lives in the harness:

    matmul  -> harness/matmul.py      measure(backend.matmul_ops(case), case)
    train   -> harness/training.py    run_training(backend.trainer(case, rank, world), ...) in backend.launch
    infer   -> harness/inference.py   run_inference(case, backend.session(case))
    generate-> harness/generation.py  run_generation(case, backend.generator(case))
               harness/engine.py      run_engine(case, backend): an engine loads its model and times itself
    serve   -> serve/point.py         measure_case(case): a point of load against the server its run opened
                                      (its workload is the served model's name, its backend the engine)

A workload that is its own measurement (its record's ``run``: the selftest) runs directly. A user's model
(``options["model"]``) is loaded and registered as a workload first (usermodel/load.py).
"""

from __future__ import annotations

import math
import time

from xpubench import backends
from xpubench.backends.base import Unsupported
from xpubench.case import SERVE
from xpubench.results.outcome import Outcome
from xpubench.workloads import get_workload

FLOP_FIGURES = ("flops_per_sample", "forward_flops_per_sample", "achieved_flops_per_s")


def run_case(case) -> Outcome:
    if case.mode == SERVE:
        from xpubench.serve.point import measure_case

        return measure_case(case)
    model_metrics: dict = {}
    if case.options.get("model"):
        from xpubench.usermodel.load import prepare

        try:
            case, model_metrics = prepare(case)
        except Unsupported as exc:   # a model of another framework than this case's backend
            return Outcome(status="skipped", message=str(exc))
    own = get_workload(case.workload).run
    if own is not None:
        return own(case)
    backend = backends.get(case.backend)
    try:
        reason = backend.unsupported(case)
        if reason:
            return Outcome(status="skipped", message=reason)
        outcome = LOOPS[case.mode](backend, case)
    except Unsupported as exc:
        return Outcome(status="skipped", message=str(exc))
    finally:
        backend.finish(case)
    if outcome.status == "ok" and model_metrics:
        for name in FLOP_FIGURES:   # a user's model whose FLOPs are n/a (usermodel: forward_flops is NaN)
            if isinstance(outcome.metrics.get(name), float) and math.isnan(outcome.metrics[name]):
                outcome.metrics[name] = None
        warned = "; ".join(w for w in (outcome.metrics.get("warning"), model_metrics.get("model_warning")) if w)
        outcome.metrics.update(model_metrics, warning=warned or None)
    return outcome


def _matmul(backend, case) -> Outcome:
    from xpubench.harness.matmul import measure

    return measure(backend.matmul_ops(case), case)


def train_one(case, rank: int = 0, world: int = 1) -> Outcome:
    """Rank ``rank`` of ``world`` measures the case's training (module level: a backend's ranks run it by
    reference, in processes of their own)."""
    from xpubench.harness.target import time_init
    from xpubench.harness.training import run_training
    from xpubench.workloads import RUNTIME

    if case.options.get("model") and case.workload not in RUNTIME:  # a fresh rank process: load it again
        from xpubench.usermodel.load import prepare

        case, _ = prepare(case)
    backend = backends.get(case.backend)
    started = time.perf_counter()
    trainer = backend.trainer(case, rank=rank, world=world)
    set_up_s = time.perf_counter() - started   # data onto the device, model and optimizer built
    outcome = run_training(trainer, case, trainer.flops_per_sample, gpu_identity=backend.gpu_identity)
    time_init(outcome, case, set_up_s)   # a case with a target records it: its clock leaves it out
    add_described(outcome.metrics, trainer)
    if outcome.metrics.get("flops_per_sample") is not None:   # training FLOPs: forward x the spec's factor (3)
        outcome.metrics["forward_flops_per_sample"] = (outcome.metrics["flops_per_sample"]
                                                       / trainer.spec.train_flops_factor)
    per_sample = get_workload(case.workload).tokens_per_sample   # token models (gpt)
    if per_sample is not None and outcome.metrics.get("samples_per_s"):
        outcome.metrics["tokens_per_s"] = outcome.metrics["samples_per_s"] * per_sample(trainer.spec)
    return outcome


def _train(backend, case) -> Outcome:
    return backend.launch(case, train_one)


def _infer(backend, case) -> Outcome:
    from xpubench.harness.inference import run_inference

    session = backend.session(case)
    outcome = run_inference(case, session, gpu_identity=backend.gpu_identity)
    if outcome.status == "ok":
        add_described(outcome.metrics, session)
    return outcome


def _generate(backend, case) -> Outcome:
    if case.devices > 1:
        return Outcome(status="skipped", message="data-parallel generation is not implemented: generate with "
                                                 "--devices 1 (data parallel applies to training)")
    if backend.kind == "engine":
        from xpubench.harness.engine import run_engine

        return run_engine(case, backend, gpu_identity=backend.gpu_identity)
    from xpubench.harness.generation import run_generation

    return run_generation(case, backend.generator(case), gpu_identity=backend.gpu_identity)


def add_described(metrics: dict, adapter) -> None:
    """Add what an adapter says about how it ran (``describe()``: compiled or eager, autotuning, the
    data-parallel layout) to a case's metrics; a ``warning`` it gives joins the measurement's."""
    described = dict(getattr(adapter, "describe", dict)())
    note = described.pop("warning", None)
    metrics.update(described)
    if note:
        metrics["warning"] = "; ".join(w for w in (metrics.get("warning"), note) if w)


LOOPS = {"matmul": _matmul, "train": _train, "infer": _infer, "generate": _generate}
