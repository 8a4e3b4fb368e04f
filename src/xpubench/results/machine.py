"""What the machine was doing around one worker process: load average, the CPU's current clock and,
on a VM, steal time (CPU time the hypervisor gave to other guests), read at the process's start and
end, so a slow process can be explained in the report. Linux /proc and /sys; anything unreadable is
None, never a guess.

    steal_fraction = Δsteal / Δtotal of /proc/stat's "cpu" line over the process's life
    busy_fraction  = Δ(total - idle - iowait) / Δtotal: the whole machine's, this worker included
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
SYS_CPU = Path("/sys/devices/system/cpu")


@dataclass(frozen=True)
class Snapshot:
    load_1m: float | None
    cpu_mhz: float | None
    cpu_times: tuple[int, ...] | None   # /proc/stat "cpu" line: user nice system idle iowait irq softirq steal


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _load(proc: Path) -> float | None:
    text = _read(proc / "loadavg")
    try:
        return float(text.split()[0]) if text else None
    except (ValueError, IndexError):
        return None


def _cpu_times(proc: Path) -> tuple[int, ...] | None:
    text = _read(proc / "stat")
    if not text or not text.startswith("cpu "):
        return None
    try:
        return tuple(int(x) for x in text.splitlines()[0].split()[1:9])
    except ValueError:
        return None


def _mhz(proc: Path, sys_cpu: Path) -> float | None:
    """Mean current clock over the CPUs this process may use: cpufreq's scaling_cur_freq (kHz) where the
    kernel has it, else /proc/cpuinfo's "cpu MHz" (on a VM often the host's nominal clock, not live)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    values = []
    for path in glob.glob(str(sys_cpu / "cpu[0-9]*" / "cpufreq" / "scaling_cur_freq")):
        index = int(Path(path).parts[-3][3:])
        text = _read(Path(path))
        if text and (cpus is None or index in cpus):
            try:
                values.append(int(text) / 1000)
            except ValueError:
                continue
    if not values:
        for line in (_read(proc / "cpuinfo") or "").splitlines():
            if line.lower().startswith("cpu mhz"):
                try:
                    values.append(float(line.split(":")[1]))
                except (IndexError, ValueError):
                    continue
    return round(sum(values) / len(values), 1) if values else None


def snapshot(proc: Path = PROC, sys_cpu: Path = SYS_CPU) -> Snapshot:
    return Snapshot(_load(proc), _mhz(proc, sys_cpu), _cpu_times(proc))


def state(start: Snapshot, end: Snapshot) -> dict:
    """The record a Run keeps in ``machine``: each reading at start and end, and the fractions between."""
    out = {"load_1m_start": start.load_1m, "load_1m_end": end.load_1m,
           "cpu_mhz_start": start.cpu_mhz, "cpu_mhz_end": end.cpu_mhz,
           "steal_fraction": None, "busy_fraction": None}
    a, b = start.cpu_times, end.cpu_times
    if a and b and len(a) == len(b) == 8:
        total = sum(b) - sum(a)
        if total > 0:
            out["steal_fraction"] = round((b[7] - a[7]) / total, 4)
            out["busy_fraction"] = round(1 - ((b[3] - a[3]) + (b[4] - a[4])) / total, 4)
    return out
