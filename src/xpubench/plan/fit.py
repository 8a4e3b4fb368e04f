"""Fits before it runs: the memory a case needs (its workload's ``memory_needed``: llama's weights + KV
cache + activations, workloads/llama/costs.py) against its device's memory in the environment record
(this machine's, or another one's from ``--env-file``). A case that can't fit is skipped at plan time
with the arithmetic (``refusal``: launch/runner.py records it without starting a worker), never
attempted; ``--dry-run`` shows the arithmetic of every case that has one (cli/plan.py).

The arithmetic leaves ``HEADROOM`` of the device's memory to what it does not count: the framework's
runtime, allocator slack, XLA's workspace, on a CPU the OS and other processes. The record holds the
device's total memory, not what is free when the case starts: a case that fits the arithmetic can still
run out (then harness/failures.py records the OOM as the case's result).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xpubench.plan.defaults import device_memory
from xpubench.units import fmt_decimal_bytes as gb
from xpubench.workloads import REGISTRY, get_workload

HEADROOM = 0.10


@dataclass(frozen=True)
class Fit:
    """A case's memory need against its device's memory."""

    need: Any                 # the workload's figure: ``.total`` bytes, ``.explain()`` the arithmetic
    memory: int | None        # the device's bytes (None: the record does not say)
    device: str

    @property
    def usable(self) -> int | None:
        return int(self.memory * (1 - HEADROOM)) if self.memory else None

    @property
    def fits(self) -> bool | None:
        """Whether the need fits the usable memory (None: unknown memory)."""
        return None if self.usable is None else self.need.total <= self.usable

    def sentence(self) -> str:
        """"llama-8b fp32 needs 32.4 GB: weights ... ; cpu has 25.3 GB, 22.7 GB usable (...): does not fit"."""
        if self.memory is None:
            return f"{self.need.explain()}; the memory of {self.device} is unknown here: not checked"
        verdict = "fits" if self.fits else "does not fit"
        return (f"{self.need.explain()}; {self.device} has {gb(self.memory)}, {gb(self.usable)} usable "
                f"({HEADROOM:.0%} kept for the framework and the rest of the system): {verdict}")


def fit_of(case, env: dict) -> Fit | None:
    """The case's Fit, or None where its workload counts no memory."""
    if case.workload not in REGISTRY:    # a user's model: its memory is not known before it loads
        return None
    workload = get_workload(case.workload)
    if workload.memory_needed is None:
        return None
    need = workload.memory_needed(workload.spec_for(case.options), case)
    return Fit(need, device_memory(env, case.backend, case.device), case.device) if need is not None else None


def refusal(case, env: dict) -> str | None:
    """Why the case is skipped before it starts (it can't fit its device's memory), or None."""
    fit = fit_of(case, env)
    if fit is None or fit.fits is not False:
        return None
    return f"does not fit the device's memory, not attempted: {fit.sentence()}"
