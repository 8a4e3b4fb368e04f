"""Data-parallel figures of a result: device count, per-device and global batch, and the scaling
efficiency against the same case on fewer devices.

    scaling_speedup    = samples/s at N / samples/s at N0
    scaling_efficiency = scaling_speedup / (N / N0)     (1.0 = perfectly linear)

N0 is the smallest device count of the same workload, backend, device kind, mode, precision,
per-device batch, data and compile setting among the results already known (normally N0 = 1;
with P processes the smallest run has P devices). Where the N devices share one set of cores (CPU
"devices": torch processes, JAX's simulated host devices) the hardware does not grow with N: the
efficiency there measures the parallel engine's overhead, not how the hardware scales, and
``scaling_note`` says so.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping

from xpubench.case import Case
from xpubench.devices.device import kind_of

MATCH = ("workload", "backend", "device", "mode", "precision", "batch_size", "data", "compile", "seed")
CPU_NOTE = ("the N CPU devices share the same cores: efficiency measures the engine's overhead, "
            "not hardware scaling")


def _baseline(case: Case, earlier: Iterable) -> tuple[int, float] | None:
    """(N0, samples/s) of the matching ok result with the fewest devices below this one's, or None."""
    best = None
    for r in earlier:
        n0, thr = r.case.devices, r.metrics.get("samples_per_s")
        if r.status != "ok" or not thr or n0 >= case.devices:
            continue
        if all(getattr(r.case, k) == getattr(case, k) for k in MATCH) and (best is None or n0 < best[0]):
            best = (n0, float(thr))
    return best


def annotate(metrics: MutableMapping, case: Case, earlier: Iterable) -> None:
    """Adds the scaling figures to a model case's metrics when a matching result on fewer devices is in
    ``earlier`` (results before this one). The case's own fields (devices, batch) are the case's: a reader
    reads them there (``Result.case``), not copied into the metrics."""
    if case.mode not in ("train", "infer"):
        return
    n = case.devices
    thr = metrics.get("samples_per_s")
    base = _baseline(case, earlier) if n > 1 and thr else None
    if base is None:
        return
    n0, thr0 = base
    metrics["scaling_base_devices"] = n0
    metrics["scaling_speedup"] = thr / thr0
    metrics["scaling_efficiency"] = (thr / thr0) / (n / n0)
    if kind_of(case.device).shared:
        metrics["scaling_note"] = CPU_NOTE
