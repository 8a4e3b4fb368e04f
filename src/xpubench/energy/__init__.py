"""Energy counters read around the same timed windows as the throughput: joules per step, per epoch
and per sample, and samples per joule, where a counter can be read; "n/a" with the reason otherwise.

One interface (``EnergyMeter``): ``start()`` just before the first timed window, ``stop()`` just
after the last one has synchronised; ``stop()`` returns an ``EnergyReading``. Sources:

* CPUs, Linux: RAPL through powercap (``/sys/class/powercap/intel-rapl:N``, Intel and AMD since Linux
  5.8), else AMD's ``amd_energy`` hwmon driver (energy.rapl). Package domains only: the whole socket,
  so other processes' work on it is counted too, and DRAM is not.
* NVIDIA GPUs: NVML's total energy counter (nvidia-ml-py, Volta or newer) (energy.gpu).
* AMD GPUs: the AMD SMI library's energy accumulator, where ``amdsmi`` is importable (energy.gpu).
* TPUs and Apple GPUs: n/a (no counter a guest or an unprivileged process can read).

A meter never raises for a missing or unreadable counter: the reading's ``joules`` is None and
``reason`` says why (no counter in a VM, no permission, library not installed, not supported).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

Clock = Callable[[], float]


@dataclass(frozen=True)
class EnergyReading:
    joules: float | None                  # energy between start() and stop(); None when not readable
    seconds: float | None                 # wall time between start() and stop()
    source: str                           # where the figure comes from, e.g. "rapl: package-0"
    reason: str | None = None             # why joules is None
    domains: dict[str, float] = field(default_factory=dict)   # joules per counter that was summed
    warning: str | None = None            # a reason to trust the figure less

    @property
    def watts(self) -> float | None:
        return self.joules / self.seconds if (self.joules is not None and self.seconds) else None

    def as_dict(self) -> dict:
        out = asdict(self)
        out["watts"] = self.watts
        return out


class EnergyMeter:
    """Base of the readers: subclasses implement ``_read()`` -> {counter: counter value} (raising
    ``Unreadable`` with a reason), ``_delta`` (value difference -> joules, wrap-around included) and
    may open a library in ``_open()`` (before the first read) and close it in ``_close()`` (after
    the last), so that no library start-up lands inside the measured interval."""

    source = "n/a"

    def __init__(self, clock: Clock = time.monotonic):
        self._clock = clock
        self._start: dict[str, float] | None = None
        self._t0 = 0.0
        self._problem: str | None = None

    def _read(self) -> dict[str, float]:
        raise NotImplementedError

    def _delta(self, name: str, start: float, end: float) -> float:
        return end - start

    def _warning(self, seconds: float) -> str | None:
        return None

    def _open(self) -> None:
        pass

    def _close(self) -> None:
        pass

    def start(self) -> None:
        try:
            self._problem = None
            self._open()
            self._start = self._read()
        except Unreadable as exc:
            self._start, self._problem = None, str(exc)
        self._t0 = self._clock()

    def stop(self) -> EnergyReading:
        seconds = self._clock() - self._t0
        if self._start is None:
            return EnergyReading(None, seconds, self.source, self._problem or "start() was not called")
        try:
            end = self._read()
        except Unreadable as exc:
            return EnergyReading(None, seconds, self.source, str(exc))
        finally:
            self._close()
        domains = {k: self._delta(k, self._start[k], end[k]) for k in self._start if k in end}
        return EnergyReading(sum(domains.values()), seconds, self.source, None, domains, self._warning(seconds))


class Unreadable(Exception):
    """A counter that cannot be read; the message is the reason shown as "n/a: <reason>"."""


class Unavailable(EnergyMeter):
    """A device with no readable counter: every reading is n/a with this reason."""

    def __init__(self, reason: str, clock: Clock = time.monotonic):
        super().__init__(clock)
        self.reason = reason

    def _read(self) -> dict[str, float]:
        raise Unreadable(self.reason)


def meter_for(device_id: str, *, vendor: str | None = None, uuid: str | None = None) -> EnergyMeter:
    """The meter for an xpubench device id ("cpu", "gpu:N", "tpu:N", "mps"). ``vendor`` ("nvidia" /
    "amd", from the device record) picks the GPU library; ``uuid`` (torch's device uuid) finds the same
    GPU in NVML whatever the enumeration order."""
    kind, _, index = device_id.partition(":")
    if kind == "cpu":
        from xpubench.energy.rapl import RaplMeter

        return RaplMeter()
    if kind == "gpu":
        from xpubench.energy.gpu import AmdSmiMeter, NvmlMeter

        return AmdSmiMeter(int(index or 0)) if vendor == "amd" else NvmlMeter(int(index or 0), uuid=uuid)
    if kind == "tpu":
        return Unavailable("no TPU energy counter is readable from the host VM")
    if kind == "mps":
        return Unavailable("macOS gives GPU power only through powermetrics, which needs root")
    return Unavailable(f"no energy counter known for device {device_id!r}")


def energy_figures(reading: EnergyReading, *, steps: int | None = None, samples: int | None = None,
                   epochs: float | None = None) -> dict:
    """The per-result figures from one reading over ``steps`` steps / ``samples`` samples / ``epochs``
    epochs (each None when not counted): joules_per_step, joules_per_epoch, joules_per_sample,
    samples_per_joule, average_watts, energy_source, energy_na (the reason, when n/a)."""
    j = reading.joules

    def per(count):
        return j / count if (j is not None and count) else None

    return {
        "energy_joules": j, "joules_per_step": per(steps), "joules_per_epoch": per(epochs),
        "joules_per_sample": per(samples), "samples_per_joule": samples / j if (j and samples) else None,
        "average_watts": reading.watts, "energy_source": reading.source,
        "energy_na": None if j is not None else f"n/a: {reading.reason}", "energy_warning": reading.warning,
    }
