"""Energy over a case's timed windows: the hooks the training and inference loops call.

``EnergyWindows(meter)`` is opened and closed around each timed region (``with energy.window():``)
and sums what the meter read over those regions only, so the energy matches the throughput it is
divided by:

* training (harness/training.py): around each steady epoch (epochs 2+; with one epoch, that epoch),
  the same region as the epoch clock; validation passes, compile and the first epoch are outside;
* inference (harness/inference.py): around the timed passes over the evaluation set (the region
  ``samples_per_s`` comes from).

Nothing is read inside a window except at its two ends; a meter that cannot be read gives n/a with
the reason (``figures`` -> ``energy_na``), never an exception.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from xpubench.devices.device import GPU, kind_of
from xpubench.energy import energy_figures, meter_for
from xpubench.energy.meter import EnergyMeter, EnergyReading, Unavailable


def meter_for_case(case, gpu_identity: Callable[[Any], dict] | None = None) -> EnergyMeter:
    """The meter of a case's device. A data-parallel case on several accelerators reads none: one board's
    counter is not the case's energy (CPU "devices" share one package, so they are read). A GPU is told
    by the framework that runs the case (``gpu_identity(case)``, its backend's: backends/base.py): its
    vendor picks NVML or AMD SMI, its UUID (torch) finds the board in NVML; without it, n/a."""
    kind = kind_of(case.device)
    if (case.devices or 1) > 1 and not kind.shared:
        return Unavailable(f"energy is read for one-device cases only ({case.devices} devices here)")
    if kind is GPU:
        if gpu_identity is None:
            return Unavailable(f"no backend said which GPU {case.device} is")
        try:
            identity = gpu_identity(case)
        except Exception as exc:  # noqa: BLE001 - a meter never fails a case: n/a with the reason
            return Unavailable(f"cannot tell which GPU {case.device} is ({' '.join(str(exc).split())[:200]})")
        return meter_for(case.device, **identity)
    return meter_for(case.device)


class EnergyWindows:
    """Sums a meter's readings over several timed windows."""

    def __init__(self, meter: EnergyMeter):
        self.meter = meter
        self.readings: list[EnergyReading] = []

    @contextmanager
    def window(self, keep: bool = True):
        """Read the meter at both ends of the block; ``keep=False`` measures nothing (a window that is
        not part of the figure, e.g. the first epoch when later ones exist)."""
        if not keep:
            yield
            return
        self.meter.start()
        try:
            yield
        finally:
            self.readings.append(self.meter.stop())

    def total(self) -> EnergyReading:
        """One reading for all windows: joules and seconds summed; n/a (the first reason) if any window
        is n/a."""
        if not self.readings:
            return EnergyReading(None, None, self.meter.source, "no timed window was read")
        bad = next((r for r in self.readings if r.joules is None), None)
        seconds = sum(r.seconds or 0.0 for r in self.readings)
        if bad is not None:
            return EnergyReading(None, seconds, bad.source, bad.reason)
        domains: dict[str, float] = {}
        for r in self.readings:
            for k, v in r.domains.items():
                domains[k] = domains.get(k, 0.0) + v
        warnings = list(dict.fromkeys(r.warning for r in self.readings if r.warning))
        return EnergyReading(sum(r.joules for r in self.readings), seconds, self.readings[0].source, None, domains,
                             "; ".join(warnings) or None)

    def figures(self, *, steps: int | None = None, samples: int | None = None, epochs: float | None = None) -> dict:
        """The Energy metrics (results/metrics_added.py) over the windows read; None values are left out."""
        reading = self.total()
        out = energy_figures(reading, steps=steps, samples=samples, epochs=epochs)
        out["energy_seconds"] = reading.seconds if reading.joules is not None else None
        return {k: v for k, v in out.items() if v is not None}


def training_figures(energy: EnergyWindows, records: list, samples_per_step: int) -> dict:
    """The training loop's energy figures: the windows are the steady epochs (records[1:]), or the only
    epoch; per step, per steady epoch (complete ones) and per sample (``samples_per_step``: every device's
    together) over those windows."""
    kept = records[1:] or records[:1]
    steps = sum(r.steps_run for r in kept)
    complete = sum(1 for r in kept if r.complete)
    return energy.figures(steps=steps, samples=steps * samples_per_step, epochs=complete or None)
