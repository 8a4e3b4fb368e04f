"""The process's peak resident memory, with a reset (the host side of every peak-memory figure).

Linux: ``VmHWM`` in /proc/self/status, reset to the current resident set by writing "5" to
/proc/self/clear_refs (Linux >= 4.0). Elsewhere ``getrusage`` ``ru_maxrss``, which cannot be reset:
bytes on macOS, KiB on Linux and the BSDs; after a ``reset_host_peak()`` that could not reset, the peak
is reported only if it rose above its value at the reset (else None: an earlier phase was higher).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_STATUS, _CLEAR = Path("/proc/self/status"), Path("/proc/self/clear_refs")
_state = {"resettable": None, "floor": None}


def _vm_hwm() -> int | None:
    try:
        m = re.search(r"^VmHWM:\s+(\d+)\s+kB", _STATUS.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(m.group(1)) * 1024 if m else None


def host_current_bytes() -> int | None:
    """The process's resident set now (``VmRSS``), or None where /proc is missing."""
    try:
        m = re.search(r"^VmRSS:\s+(\d+)\s+kB", _STATUS.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(m.group(1)) * 1024 if m else None


def _ru_maxrss() -> int | None:
    try:
        import resource
    except ImportError:   # Windows
        return None
    value = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return value if sys.platform == "darwin" else value * 1024   # macOS reports bytes, Linux KiB


def reset_host_peak() -> None:
    """Start a new peak: from now on ``host_peak_bytes()`` is the highest resident set since this call."""
    try:
        _CLEAR.write_text("5")
        _state.update(resettable=_vm_hwm() is not None, floor=None)
    except OSError:
        _state.update(resettable=False, floor=_ru_maxrss())


def host_peak_bytes() -> int | None:
    """The process's peak resident set in bytes: since the last reset where one was possible; the
    lifetime peak when none was asked for; None when the peak since an impossible reset is unknown."""
    if _state["resettable"]:
        return _vm_hwm()
    peak = _vm_hwm() or _ru_maxrss()
    floor = _state["floor"]
    return peak if floor is None or (peak is not None and peak > floor) else None


class HostPeak:
    """The host counter with the interface of the backends' ``PeakMemory`` (reset, read)."""

    def reset(self) -> None:
        reset_host_peak()

    def read(self) -> int | None:
        return host_peak_bytes()
