"""A generation case of an engine (backends/engine.py): the engine loads its own model and times itself.

The workload hands over its model as a checkpoint folder (its ``checkpoint`` hook: ``--weights``, else
random weights from the case's seed) and its lengths (``generation_lengths``, the spec's depth); the
engine converts it to the case's format unless its cache has it and loads it (``load_s``: conversion,
when there was one, and loading, untimed in the figures), then times ``bench``'s prefills and decode
steps with its own clock. The figures carry the generation loop's names (harness/generation.py), and
the workload's counts are added the same way (``add_counts``: prefill FLOPs, bytes per token), so the
pp/tg table and the bandwidth bound read an engine's row as any framework's.

No energy is read around what an engine times (``energy_na`` says why): its timed regions are its own.
"""

from __future__ import annotations

import time

from xpubench.energy.meter import Unavailable
from xpubench.energy.windows import meter_for_case
from xpubench.harness.generation import add_counts
from xpubench.results.outcome import Outcome


def self_timed_energy(meter) -> str:
    """Why an engine's case has no J/token: the device's meter can't be read (its reason, e.g. no CPU energy
    counter), else no window can be read around regions the engine times itself."""
    meter = meter or Unavailable("no energy meter was given")
    meter.start()
    reading = meter.stop()
    if reading.joules is None:
        return f"n/a: {reading.reason}"
    return "n/a: the engine times itself: no energy window around its timed regions"


def run_engine(case, engine, gpu_identity=None) -> Outcome:
    """The case measured by ``engine`` (module docstring)."""
    from xpubench.workloads import get_workload

    workload = get_workload(case.workload)
    spec = workload.spec_for(case.options)
    prompt_len, new_tokens = workload.generation_lengths(spec, case.options)
    if new_tokens < 2:
        raise ValueError(f"generation needs at least 2 new tokens (a prefill and a decode step), got {new_tokens}")
    started = time.perf_counter()
    model = engine.load(workload.checkpoint(spec, case.seed), case.precision, case.device)
    load_s = time.perf_counter() - started
    metrics, samples = engine.bench(model, prompt_len=prompt_len, new_tokens=new_tokens, depth=spec.depth,
                                    batch=case.batch_size, budget_s=case.time_budget_s)
    metrics = {"energy_na": self_timed_energy(meter_for_case(case, gpu_identity)), "load_s": load_s, **metrics}
    add_counts(metrics, case, case.batch_size, prompt_len, new_tokens)
    return Outcome(metrics=metrics, samples=samples)
