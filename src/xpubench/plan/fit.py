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
    limit: str = ""           # what the figure is when it is not the device's total (limit_note)

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
        return (f"{self.need.explain()}; {self.has()} ({HEADROOM:.0%} kept for the framework and the rest of "
                f"the system): {verdict}")

    def has(self) -> str:
        """"gpu:0 has 63.8 GB, 57.4 GB usable (XLA's allocator limit: ...)"."""
        if self.memory is None:
            return f"the memory of {self.device} is unknown here"
        return (f"{self.device} has {gb(self.memory)}, {gb(self.usable)} usable"
                + (f" ({self.limit})" if self.limit else ""))


def fit_of(case, env: dict) -> Fit | None:
    """The case's Fit, or None where its workload counts no memory."""
    if case.workload not in REGISTRY:    # a user's model: its memory is not known before it loads
        return None
    workload = get_workload(case.workload)
    if workload.memory_needed is None:
        return None
    need = workload.memory_needed(workload.spec_for(case.options), case)
    if need is None:
        return None
    return Fit(need, device_memory(env, case.backend, case.device), case.device,
               limit_note(env, case.backend, case.device))


def limit_note(env: dict, backend: str, device: str) -> str:
    """Why a device's memory is below the card's: JAX records XLA's allocator limit on a GPU (the share
    ``XLA_PYTHON_CLIENT_MEM_FRACTION`` gives its allocator, 75% by default, whether or not it
    preallocates: devices/records.py), and a JAX case can use no more. "" for a device's total."""
    from xpubench.backends.peaks import device_record

    record = device_record(env, backend, device)
    if not record.get("memory_is_limit"):
        return ""
    share = (env.get("variables") or {}).get("XLA_PYTHON_CLIENT_MEM_FRACTION")
    total = next((d.get("memory_bytes") for info in (env.get("backends") or {}).values()
                  for d in info.get("devices") or [] if isinstance(d, dict) and d.get("id") == device
                  and d.get("name") == record.get("name") and d.get("memory_bytes") and not d.get("memory_is_limit")),
                 None)
    card = f"the card's {gb(total)}" if total else "the card's memory"
    said = (f"{card} at XLA_PYTHON_CLIENT_MEM_FRACTION={share}" if share else
            f"75% of {card} by default: XLA_PYTHON_CLIENT_MEM_FRACTION sets the share")
    return f"XLA's allocator limit, {said}; a JAX case can use no more"


def memory_lines(cases, env: dict) -> list[str]:
    """The dry run's memory arithmetic of the planned ``cases``, each device and each need said once (the
    cases numbered from 1). A device reached by several frameworks with different figures (torch: the
    card, JAX: its allocator's limit) is named with its framework."""
    fits = [(number, case.backend, fit) for number, case in enumerate(cases, 1)
            for fit in [fit_of(case, env)] if fit is not None]
    if not fits:
        return []
    figures: dict[str, set] = {}
    for _, _, fit in fits:
        figures.setdefault(fit.device, set()).add(fit.memory)
    devices: dict[str, Fit] = {}
    needs: dict[str, dict[str, list[tuple[int, Fit]]]] = {}
    for number, backend, fit in fits:
        label = fit.device if len(figures[fit.device]) == 1 else f"{fit.device} ({backend})"
        devices.setdefault(label, fit)
        needs.setdefault(fit.need.explain(), {}).setdefault(label, []).append((number, fit))
    lines = [f"memory ({HEADROOM:.0%} of each device's memory kept for the framework and the rest of the system):"]
    lines += ["  " + fit.has().replace(fit.device, label, 1) for label, fit in devices.items()]
    for need, by_device in needs.items():
        out = [label for label, cases in by_device.items() if cases[0][1].fits is False]
        unknown = [label for label, cases in by_device.items() if cases[0][1].fits is None]
        fit_on = [label for label in by_device if label not in out and label not in unknown]
        said = [("fits " + ("every device" if len(fit_on) == len(devices) else ", ".join(fit_on))) if fit_on else "",
                f"not checked on {', '.join(unknown)} (memory unknown)" if unknown else "",
                "does not fit " + "; ".join(f"{label} (skipped: {', '.join(f'#{n}' for n, _ in by_device[label])})"
                                            for label in out) if out else ""]
        lines.append(f"  {need}: {'; '.join(s for s in said if s)}")
    return lines


def refusal(case, env: dict) -> str | None:
    """Why the case is skipped before it starts (its engine can't load its model in its format:
    plan/engines.py; it can't fit its device's memory), or None."""
    from xpubench.plan import engines

    cannot = engines.refusal(case)
    if cannot:
        return f"{cannot}: not attempted"
    fit = fit_of(case, env)
    if fit is None or fit.fits is not False:
        return None
    return f"does not fit the device's memory, not attempted: {fit.sentence()}"
