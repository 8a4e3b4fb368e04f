"""Measured ceilings kept between runs, per machine, in ``$XDG_CACHE_HOME/xpubench/ceilings.json``
(``~/.cache/xpubench/ceilings.json`` when XDG_CACHE_HOME is unset).

What identifies a machine (``machine_key``, kept in backends/identity.py for the timing history too), in two
parts:

* ``hardware``: the CPU (model, vendor, family/model/part, architecture, SIMD flags, logical, physical
  and usable cores, cpufreq's maximum clock), the host memory, and every accelerator (kind, id, name,
  compute capability). Not the hostname: a container gets a new one every start, and two hosts with
  the same hardware and software have the same ceilings. Not the current clock or free memory: they
  change between runs.
* ``software``: the xpubench version; each backend's version, jaxlib, CUDA / HIP / cuDNN versions and
  numpy's BLAS; the GPU drivers; the thread and device variables that change what a backend runs on
  (OMP_NUM_THREADS, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS, XLA_FLAGS, CUDA_VISIBLE_DEVICES,
  HIP_VISIBLE_DEVICES) and those that pick CPU kernels (OPENBLAS_CORETYPE, ...: devices/envvars.py).

An entry is used only when both parts equal this run's. Otherwise it is *foreign* (other hardware:
another machine, or other CPUs or devices visible) or *stale* (same hardware, other software, e.g. an
older xpubench or a torch upgrade), and the lookup says which and what differs. A cache file that is
missing, unreadable or of another format is never an error: it is reported and rewritten on store.
Writes go to a temporary file renamed over the old one, so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xpubench import readfile
from xpubench.backends.identity import machine_key  # noqa: F401 - the key of an entry, callers find it here
from xpubench.envnames import cache_folder
from xpubench.errors import UserError
from xpubench.harness.bandwidth import Bandwidth
from xpubench.harness.ceiling import Ceiling
from xpubench.legible.units import utc_now
from xpubench.results.validate import JSON, TEXT, Invalid, list_of, map_of, number, optional, record, whole

FORMAT = 1
MAX_BYTES = 16 * readfile.MiB
RATE = optional(number(0))
# what a run reads of an entry (ceilings/runtime.py): checked on read, so a hand-edited cache can't put a
# string where a rate belongs into a results file's fingerprint
ENTRY = record({
    "key": map_of(JSON), "written": TEXT,
    "ceilings": map_of(record({"backend": TEXT, "device": TEXT, "precision": TEXT, "flops_per_s": RATE,
                               "best_window_flops_per_s": RATE, "ci95_low_flops_per_s": RATE,
                               "ci95_high_flops_per_s": RATE, "cv": RATE, "shape": list_of(whole(1)),
                               "samples_s": list_of(RATE), "warning": TEXT}, required=("backend", "device",
                                                                                        "precision"))),
    "bandwidth": map_of(record({"backend": TEXT, "device": TEXT, "array_bytes": whole(0), "gb_per_s": RATE,
                                "spec_gb_per_s": RATE, "warning": TEXT, "kernels": map_of(record({
                                    "kernel": TEXT, "description": TEXT, "bytes_per_call": RATE, "gb_per_s": RATE,
                                    "best_gb_per_s": RATE, "cv": RATE, "samples_s": list_of(RATE), "reps": whole(0),
                                    "warning": TEXT, "error": TEXT}))}, required=("backend", "device"))),
    "brief_bandwidth": map_of(record({"gb_per_s": list_of(number(0)), "written": TEXT},
                                     required=("gb_per_s", "written"))),
})
MAX_ENTRIES = 8          # most recent machine keys kept (e.g. several virtual environments)


def cache_path(environ: Mapping[str, str] = os.environ) -> Path:
    return cache_folder(environ) / "ceilings.json"


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def differences(old: dict, new: dict, limit: int = 3) -> str:
    """'software.backends.torch.version: 2.12.0 -> 2.13.0; ...' for the first ``limit`` differences."""
    a, b = _flat(old), _flat(new)
    diffs = [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    more = f" (+{len(diffs) - limit} more)" if len(diffs) > limit else ""
    return "; ".join(diffs[:limit]) + more


def _read(path: Path) -> tuple[list[dict], str | None]:
    """(the entries, None), or ([], why the file can't be used): missing, not a regular file, too large,
    not strict JSON, another format, or an entry whose figures are not what ``ENTRY`` says."""
    if not path.exists():
        return [], f"no cache file at {path}"
    try:
        data = readfile.loads_json(readfile.read_bytes(path, "cache file", MAX_BYTES), str(path))
    except UserError as exc:
        return [], f"cache file {path} is unreadable ({exc}); it will be rewritten"
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), list):
        return [], f"cache file {path} has another format; it will be rewritten"
    entries = [e for e in data["entries"] if isinstance(e, dict) and isinstance(e.get("key"), dict)]
    try:
        for i, entry in enumerate(entries):
            ENTRY(entry, f"entries[{i}]")
            [Ceiling.from_dict(c) for c in (entry.get("ceilings") or {}).values()]
            [Bandwidth.from_dict(b) for b in (entry.get("bandwidth") or {}).values()]
    except (Invalid, TypeError) as exc:
        return [], f"cache file {path} is unreadable ({exc}); it will be rewritten"
    return entries, None


def lookup(key: dict, path: Path | None = None) -> tuple[dict | None, str | None]:
    """(the entry made with exactly this key, None) or (None, why no entry can be used)."""
    entries, problem = _read(path or cache_path())
    if problem:
        return None, problem
    for entry in entries:
        if entry["key"] == key:
            return entry, None
    same_hardware = [e for e in entries if e["key"].get("hardware") == key["hardware"]]
    if same_hardware:
        return None, f"stale: made with other software ({differences(same_hardware[-1]['key'], key)})"
    if entries:
        return None, f"foreign: made on other hardware ({differences(entries[-1]['key'], key)})"
    return None, "the cache file holds no entries"


def cached_ceiling(entry: dict | None, backend: str, device: str, precision: str) -> Ceiling | None:
    data = (entry or {}).get("ceilings", {}).get(f"{backend}/{device}/{precision}")
    return Ceiling.from_dict(data) if data else None


def cached_bandwidth(entry: dict | None, backend: str, device: str) -> Bandwidth | None:
    data = (entry or {}).get("bandwidth", {}).get(f"{backend}/{device}")
    return Bandwidth.from_dict(data) if data else None


def cached_brief(entry: dict | None, backend: str, device: str) -> dict | None:
    """A run's brief bandwidth kept for this backend and device (ceilings/runtime.py ``brief_bandwidth``):
    {"gb_per_s": [each measurement's fastest window], "written"}, or None."""
    found = (entry or {}).get("brief_bandwidth", {}).get(f"{backend}/{device}")
    return found if found and found.get("gb_per_s") else None


def summary_rows(entry: dict | None) -> list[dict]:
    """One row per cached figure, for ``xpubench env``: backend, device, what ("fp32 matmul" /
    "bandwidth"), value and unit, where (shape or kernel), written."""
    rows = []
    for data in (entry or {}).get("ceilings", {}).values():
        c = Ceiling.from_dict(data)
        rows.append({"backend": c.backend, "device": c.device, "what": f"{c.precision} matmul",
                     "value": c.flops_per_s / 1e9 if c.flops_per_s else None, "unit": "GFLOP/s",
                     "where": "x".join(map(str, c.shape)) if c.shape else (c.warning or "n/a"),
                     "written": entry.get("written")})
    for data in (entry or {}).get("bandwidth", {}).values():
        b = Bandwidth.from_dict(data)
        best = max((k for k in b.kernels.values() if not k.error), key=lambda k: k.gb_per_s, default=None)
        rows.append({"backend": b.backend, "device": b.device, "what": "bandwidth", "value": b.gb_per_s,
                     "unit": "GB/s", "where": best.kernel if best else (b.warning or "n/a"),
                     "written": entry.get("written")})
    for name, brief in (entry or {}).get("brief_bandwidth", {}).items():
        backend, _, device = name.partition("/")
        values = brief["gb_per_s"]
        rows.append({"backend": backend, "device": device, "what": "brief bandwidth (a run's)",
                     "value": statistics.median(values), "unit": "GB/s",
                     "where": f"median of {len(values)}, ±{spread(values):.0%}", "written": brief["written"]})
    return rows


def spread(values: list[float]) -> float:
    """Half the range of repeated measurements over their median: the "±" said beside a kept figure."""
    middle = statistics.median(values)
    return (max(values) - min(values)) / 2 / middle if middle else 0.0


def store(key: dict, ceilings: list[Ceiling] = (), bandwidths: list[Bandwidth] = (), path: Path | None = None,
          briefs: dict[str, list[float]] | None = None) -> Path:
    """Add (or replace) these figures in this key's entry (``briefs``: {"backend/device": a run's brief
    bandwidth measurements, GB/s}); other keys' entries are kept, the oldest dropped beyond MAX_ENTRIES.
    Returns the file written."""
    path = path or cache_path()
    entries, _ = _read(path)
    entry = next((e for e in entries if e["key"] == key), None) or {"key": key, "ceilings": {}, "bandwidth": {}}
    entries = [e for e in entries if e is not entry] + [entry]
    for c in ceilings:
        entry.setdefault("ceilings", {})[f"{c.backend}/{c.device}/{c.precision}"] = c.as_dict()
    for b in bandwidths:
        entry.setdefault("bandwidth", {})[f"{b.backend}/{b.device}"] = b.as_dict()
    now = utc_now()
    for name, values in (briefs or {}).items():
        entry.setdefault("brief_bandwidth", {})[name] = {"gb_per_s": list(values), "written": now}
    if ceilings or bandwidths or "written" not in entry:   # when the searched figures were (a brief has its own)
        entry["written"] = now
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".ceilings-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"format": FORMAT, "entries": entries[-MAX_ENTRIES:]}, fh, indent=1)
    os.replace(tmp, path)
    return path
