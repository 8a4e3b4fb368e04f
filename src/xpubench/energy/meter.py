"""The energy-meter interface every reader implements (RAPL, NVML, AMD SMI), and its reading."""

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
