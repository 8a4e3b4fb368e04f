"""The memory-bandwidth ceiling: STREAM-like copy and triad on arrays far beyond the last-level cache.

Kernels (McCalpin's STREAM names) and the bytes each call is counted as moving, per element of one
array of ``array_bytes``:

=======  ==================  =============================================================
kernel   operation           bytes counted
=======  ==================  =============================================================
copy     c = a               2 x array_bytes (read a, write c)
triad    a = b + s * c       3 x array_bytes (read b, read c, write a)
=======  ==================  =============================================================

A backend's ``StreamOps`` may run a kernel several times per call (JAX runs it inside one jitted
loop so that XLA reuses its buffers instead of page-faulting a fresh output every call); it says so
in ``Kernel.transfers``: the number of array-sized reads and writes one call really performs. As in
STREAM, the write-allocate read a CPU does before storing to a cache line is not counted, so the
DRAM traffic of a plain store is up to 1.5x (copy) or 1.33x (triad) the figure.

Array size: each array is at least ``LLC_FACTOR`` (4, STREAM's rule) times the last-level cache,
``MIN_ARRAY_BYTES`` at least, and at most ``MAX_MEMORY_SHARE`` of the memory over the three arrays.
On CPUs the cache is the sum of the distinct L3 (else L2) caches of the CPUs this process may use,
read from sysfs; unknown -> ``DEFAULT_ARRAY_BYTES``. On accelerators the cache is never taken below
``LARGEST_ACCEL_CACHE``: what a device reports is not its last-level cache everywhere (ROCm's
``L2_cache_size`` on an MI300X is one XCD's 4 MB, while its 256 MB Infinity Cache sits in front of HBM:
arrays sized from the 4 MB would be served from that cache and copy/triad could pass the 5.3 TB/s HBM
figure). Each figure says what its arrays were (``Bandwidth.note``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xpubench.harness.timing import Clock, time_windows
from xpubench.results.stats import summarize

LLC_FACTOR = 4
MIN_ARRAY_BYTES = 64 * 2**20
DEFAULT_ARRAY_BYTES = 256 * 2**20
LARGEST_ACCEL_CACHE = 256 * 2**20    # the largest last-level cache of a known accelerator: the 256 MB AMD
                                     # Infinity Cache of MI300X/MI325X (AMD via servethehome.com, "AMD Instinct
                                     # MI300X GPU and MI300A APUs launched"); H100 L2 is 50 MB
DEFAULT_ACCEL_ARRAY_BYTES = LLC_FACTOR * LARGEST_ACCEL_CACHE
MAX_MEMORY_SHARE = 0.25       # the three arrays together
DEFAULT_BUDGET_S = 10.0       # per backend and device, both kernels
CHECK_STRIDE = 1009           # kernels are checked on every CHECK_STRIDE-th element and the last one
_SYS_CPU = Path("/sys/devices/system/cpu")


@dataclass
class Kernel:
    """One STREAM kernel ready to run: ``run()`` does it (returns what ``sync`` waits on),
    ``transfers`` array-sized reads + writes per call, ``check()`` -> None or what is wrong."""

    run: Callable[[], Any]
    transfers: float
    check: Callable[[], str | None]
    description: str


@dataclass
class StreamOps:
    """What a backend supplies: its kernels on arrays of ``array_bytes`` each, and its sync."""

    kernels: dict[str, Kernel]
    sync: Callable[[Any], None]
    array_bytes: int


@dataclass
class KernelRate:
    kernel: str
    description: str
    bytes_per_call: float
    gb_per_s: float                  # 1e9 bytes/s, from the median seconds per call
    best_gb_per_s: float             # from the fastest window (STREAM prints this one)
    cv: float
    samples_s: list[float] = field(default_factory=list)
    reps: int = 1
    warning: str | None = None       # the samples are too spread to trust (stats.summarize)
    error: str | None = None         # the kernel computed a wrong result: no figure


@dataclass
class Bandwidth:
    """Measured copy / triad rates of one backend on one device; ``gb_per_s`` is the best median."""

    backend: str
    device: str
    array_bytes: int
    gb_per_s: float | None
    kernels: dict[str, KernelRate]
    spec_gb_per_s: float | None = None      # the chip table's figure, where known
    elapsed_s: float = 0.0
    warning: str | None = None
    note: str | None = None                 # how big the arrays were, against which cache (``array_note``)

    @property
    def best_gb_per_s(self) -> float | None:
        """The fastest window of any correct kernel (STREAM's own figure): a ceiling, what a bound needs
        where other work shares the machine (the median reads that load; the fastest window least)."""
        return max((r.best_gb_per_s for r in self.kernels.values() if not r.error and r.best_gb_per_s), default=None)

    @property
    def pct_of_spec(self) -> float | None:
        return self.gb_per_s / self.spec_gb_per_s if (self.gb_per_s and self.spec_gb_per_s) else None

    def as_dict(self) -> dict:
        out = asdict(self)
        out["pct_of_spec"] = self.pct_of_spec
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Bandwidth:
        kernels = {k: KernelRate(**v) for k, v in (data.get("kernels") or {}).items()}
        known = set(cls.__dataclass_fields__) - {"kernels"}
        return cls(kernels=kernels, **{k: v for k, v in data.items() if k in known})


def _size_bytes(text: str) -> int | None:
    """sysfs cache size '32768K' / '1M' -> bytes."""
    text = text.strip().upper()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * scale if digits.isdigit() else None


def llc_bytes(cpus: list[int] | None = None, sys_cpu: Path = _SYS_CPU) -> int | None:
    """Total last-level cache of the given CPUs (default: those this process may use), counting each
    shared cache once (by its shared_cpu_list); None where sysfs does not say."""
    if cpus is None:
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    caches: dict[tuple[int, str], int] = {}
    for cpu in cpus:
        for index in sorted((sys_cpu / f"cpu{cpu}" / "cache").glob("index*")):
            try:
                level = int((index / "level").read_text())
                kind = (index / "type").read_text().strip()
                size = _size_bytes((index / "size").read_text())
                shared = (index / "shared_cpu_list").read_text().strip()
            except (OSError, ValueError):
                continue
            if kind in ("Unified", "Data") and size:
                caches[(level, shared)] = size
    if not caches:
        return None
    top = max(level for level, _ in caches)
    return sum(size for (level, _), size in caches.items() if level == top)


def available_memory_bytes() -> int | None:
    """Memory the OS could give this process now (Linux: MemAvailable), or None."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def mismatch(got: Any, want: Any, rtol: float = 1e-6) -> str | None:
    """None when two host arrays agree, else a one-line description (for ``Kernel.check``; backends pass
    samples: every CHECK_STRIDE-th element and the last)."""
    import numpy as np

    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    bad = ~np.isclose(got, want, rtol=rtol, atol=0.0)
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    return f"wrong result at element {i}: {got[i]!r} instead of {want[i]!r} ({int(bad.sum())} elements differ)"


def array_bytes_for(cache_bytes: int | None, memory_bytes: int | None, accelerator: bool = False) -> int:
    """Bytes per array: LLC_FACTOR x the cache (or the default), within the memory share. On an
    accelerator the cache counts as at least LARGEST_ACCEL_CACHE, whatever the device reports."""
    if accelerator:
        cache_bytes = max(cache_bytes or 0, LARGEST_ACCEL_CACHE)
    if cache_bytes:
        size = max(LLC_FACTOR * cache_bytes, MIN_ARRAY_BYTES)
    else:
        size = DEFAULT_ARRAY_BYTES
    if memory_bytes:
        size = min(size, int(MAX_MEMORY_SHARE * memory_bytes / 3))
    return size


def array_note(array_bytes: int, accelerator: bool) -> str:
    """What a bandwidth figure's arrays were: their size, and on an accelerator whether they are above
    the largest known last-level cache (when the device's memory capped them, the figure may be cached)."""
    said = f"arrays of {array_bytes / 2**20:,.0f} MiB each"
    if not accelerator:
        return f"{said} (at least {LLC_FACTOR} x this CPU's last-level cache where sysfs gives it)"
    if array_bytes >= LLC_FACTOR * LARGEST_ACCEL_CACHE:
        return (f"{said}: at least {LLC_FACTOR} x {LARGEST_ACCEL_CACHE >> 20} MiB, above the last-level cache of "
                "every known accelerator (MI300X's 256 MB Infinity Cache included)")
    return (f"{said}: the device's free memory kept them below {LLC_FACTOR} x {LARGEST_ACCEL_CACHE >> 20} MiB; "
            "part of the traffic may be served from a cache")


def measure_bandwidth(ops: StreamOps, *, backend: str, device: str, budget_s: float = DEFAULT_BUDGET_S,
                      spec_bytes_per_s: float | None = None, clock: Clock = time.perf_counter) -> Bandwidth:
    """Time each kernel in synchronised windows (after one checked warm-up call) and turn the median
    seconds per call into GB/s = transfers x array_bytes / seconds."""
    start = clock()
    rates: dict[str, KernelRate] = {}
    share = budget_s / max(len(ops.kernels), 1)
    for name, kernel in ops.kernels.items():
        moved = kernel.transfers * ops.array_bytes
        ops.sync(kernel.run())                 # warm-up: first touch, compile
        problem = kernel.check()
        if problem:
            rates[name] = KernelRate(name, kernel.description, moved, 0.0, 0.0, 0.0, error=problem)
            continue
        w = time_windows(kernel.run, ops.sync, min_window_s=0.1, n_windows=7, max_total_s=share, clock=clock)
        s = summarize(w.samples)
        rates[name] = KernelRate(name, kernel.description, moved, moved / s.median / 1e9, moved / s.min / 1e9,
                                 s.cv, list(w.samples), w.reps, warning=s.warning)
    good = [r.gb_per_s for r in rates.values() if not r.error and r.gb_per_s]
    problems = [f"{r.kernel}: {r.error}" for r in rates.values() if r.error]
    from xpubench.devices.device import is_accelerator

    return Bandwidth(backend=backend, device=device, array_bytes=ops.array_bytes, gb_per_s=max(good, default=None),
                     kernels=rates, spec_gb_per_s=spec_bytes_per_s / 1e9 if spec_bytes_per_s else None,
                     elapsed_s=clock() - start, warning="; ".join(problems) or None,
                     note=array_note(ops.array_bytes, is_accelerator(device)))
