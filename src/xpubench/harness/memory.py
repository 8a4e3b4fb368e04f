"""The peak-memory pair every adapter offers the loops (docs/methodology.md, "Peak memory"):
``reset_peak_memory()`` right before measuring, ``peak_memory()`` after, from one counter with ``reset()``
and ``read()`` (the backends' PeakMemory, devices/memory.HostPeak) kept in ``self.memory``; None where
the device keeps no counter (the figure is then n/a)."""

from __future__ import annotations

from typing import Any


class PeakMemoryFrom:
    memory: Any = None

    def reset_peak_memory(self) -> None:
        if self.memory is not None:
            self.memory.reset()

    def peak_memory(self) -> int | None:
        return self.memory.read() if self.memory is not None else None
