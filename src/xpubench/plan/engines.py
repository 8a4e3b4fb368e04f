"""What an engine cannot load, said before anything runs (backends/engine.py ``cannot_load``): a format it
lacks (``-b openvino -p fp16``), or a checkpoint its format can't hold (llama.cpp's q8_0 blocks of 32
weights across a row of 48). A request of which nothing can run is one line and exit 2; in a sweep where
other cases run, such a case is recorded skipped with the reason without a worker started (plan/fit.py
``refusal``), as a case that can't fit its device's memory is."""

from __future__ import annotations

from xpubench import backends
from xpubench.errors import UserError
from xpubench.workloads import REGISTRY, get_workload


def refusal(case) -> str | None:
    """Why the case's engine can't load its model in its format, or None (a framework's case: None)."""
    record = backends.record(case.backend)
    if record.kind != "engine" or case.workload not in REGISTRY or case.mode != "generate":
        return None
    workload = get_workload(case.workload)
    if not record.supports(workload):
        return None
    weights = workload.checkpoint(workload.spec_for(case.options), case.seed, write=False)
    return record.cannot_load(weights, case.precision)


def check(cases) -> None:
    """UserError (one line: the first reason) when every case of the plan is refused."""
    reasons = [refusal(case) for case in cases]
    if reasons and all(reasons):
        raise UserError(reasons[0])
