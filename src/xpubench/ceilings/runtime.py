"""The measured ceilings a run ranks its results against, recorded in the run's fingerprint.

Before the cases run, ``api.run`` asks ``for_run(env, cases)`` for the ceiling of every backend x
device x precision the plan's matmul, training and inference cases use, and the bandwidth of every
backend x device. They come from the cache (ceilings/cache.py) when it holds them for this machine
key; otherwise:

* ``measure=False`` (the default): the figures are n/a and the record says why and how to get them
  (``xpubench ceilings``, or ``measure_ceilings=True`` / ``--measure-ceilings``);
* ``measure=True``: the missing ones are measured first (a child process per backend and device,
  ~30 s per precision on a CPU, 60 s on an accelerator, plus ~10 s of bandwidth) and cached.

The record (``fingerprint["ceilings"]``) is small: per "backend/device/precision" the ceiling's
FLOP/s, its relative noise (half-width of the 95% interval / the median), shape and when it was
written; per "backend/device" the measured bytes/s, its spread, when it was measured and whether that
was for this run (``fresh``). ``analysis/ranked.py`` ranks the results against it when a file is loaded.
A generation case's device with no bandwidth cached by ``xpubench ceilings`` gets the run's brief one
(``brief_bandwidth``), itself cached: the figure behind "% of bound" holds still from run to run.
"""

from __future__ import annotations

import statistics
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from xpubench import backends
from xpubench.ceilings import cache
from xpubench.ceilings.measure import ceilings_for
from xpubench.envnames import refresh_asked
from xpubench.legible.units import utc_now
from xpubench.results.modes import mode_of

BRIEF_BANDWIDTH_S = 0.6   # copy + triad, both kernels, of each measurement of the brief bandwidth a run takes
BRIEF_MEASUREMENTS = 3    # its figure is their median, said with their spread
BRIEF_TIMEOUT_S = 60.0    # the child's start (a framework's import) and its arrays' first touch included
HOW = ("run `xpubench ceilings` once on this machine (about 30 s per precision on a CPU), or "
       "`xpubench run --measure-ceilings` measures them before the cases")


def wanted(cases: Iterable) -> dict[tuple[str, str], list[str]]:
    """{(backend, device): [precisions]} with a ceiling adapter, for the cases' modes; a generation case's
    backend and device with no precision of its own (int8) still wants the bandwidth."""
    out: dict[tuple[str, str], list[str]] = {}
    for c in cases:
        mode = mode_of(c.mode)
        if mode is None or not backends.known(c.backend):
            continue
        has_ceiling = c.precision in backends.get(c.backend).ceiling_dtypes
        if not has_ceiling and not mode.bandwidth_bound:   # decode wants the bandwidth whatever its precision
            continue
        precisions = out.setdefault((c.backend, c.device), [])
        if has_ceiling and c.precision not in precisions:
            precisions.append(c.precision)
    return out


def _bandwidth_bound(case) -> bool:
    mode = mode_of(case.mode)
    return mode is not None and mode.bandwidth_bound


def summary(ceiling, written: str | None, source: str) -> dict[str, Any]:
    return {"flops_per_s": ceiling.flops_per_s, "rel_noise": ceiling.rel_noise,
            "shape": list(ceiling.shape) if ceiling.shape else None, "written": written, "source": source,
            "warning": ceiling.warning}


def for_run(env: dict, cases: Iterable, *, measure: bool = False, budget_s: float | None = None,
            path: Path | None = None, on_note: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The ceilings record of a run (see the module docstring)."""
    key = cache.machine_key(env)
    entry, problem = cache.lookup(key, path)
    record: dict[str, Any] = {"ceilings": {}, "bandwidth": {}, "missing": [], "note": None}
    for (backend, device), precisions in wanted(cases).items():
        found = {p: cache.cached_ceiling(entry, backend, device, p) for p in precisions}
        bw = cache.cached_bandwidth(entry, backend, device)
        source = "cache"
        written = (entry or {}).get("written")
        if measure and (not all(found.values()) or bw is None):
            if on_note:
                on_note(f"measuring the {backend} {device} ceilings ({', '.join(p for p, c in found.items() if not c)}"
                        f"{' + bandwidth' if bw is None else ''}) before the run")
            try:
                got = ceilings_for(env, backend, device, precisions, budget_s=budget_s, path=path)
            except (RuntimeError, OSError, ValueError) as exc:
                record["missing"].append(f"{backend}/{device}: measurement failed: {exc}")
            else:
                found, bw = got["ceilings"], got["bandwidth"]
                source, written = ("measured before this run" if got["source"] == "measured" else source), None
        for p, c in found.items():
            if c is not None and c.flops_per_s:
                record["ceilings"][f"{backend}/{device}/{p}"] = summary(c, written, source)
            else:
                record["missing"].append(f"{backend}/{device}/{p}")
        if bw is not None and bw.gb_per_s:
            record["bandwidth"][f"{backend}/{device}"] = {"bytes_per_s": bw.gb_per_s * 1e9, "written": written,
                                                          "spread": _window_spread(bw), "fresh": source != "cache"}
    if record["missing"]:
        where = str(path or cache.cache_path())   # the record goes into a results file: no local path in it
        problem = problem and problem.replace(f" at {where}", "").replace(f" {where}", "")
        record["note"] = (f"no measured ceiling for {', '.join(record['missing'])}"
                          + (f" ({problem})" if problem else "") + f": {HOW}")
    return record


def _window_spread(bw) -> float | None:
    """The spread of the windows of the kernel whose median is the figure (harness/bandwidth.py)."""
    best = max((k for k in bw.kernels.values() if not k.error and k.gb_per_s), key=lambda k: k.gb_per_s, default=None)
    rates = [best.bytes_per_call / s / 1e9 for s in best.samples_s if s] if best else []
    return cache.spread(rates) if len(rates) > 1 else None


def brief_bandwidth(record: dict[str, Any], env: dict, cases: Iterable,
                    on_note: Callable[[str], None] | None = None, *, refresh: bool | None = None,
                    path: Path | None = None) -> None:
    """Every generation case's device gets the bandwidth its decode bound uses (analysis/generation.py), said
    in one note with where it came from: the ``xpubench ceilings`` figure ``record`` holds, else the run's
    brief one: ``BRIEF_MEASUREMENTS`` copy/triad measurements of ``BRIEF_BANDWIDTH_S`` each, in a child
    process of the first of its backends that has a ceiling adapter (harness/bandwidth.py), each its
    fastest window (a bound's ceiling: a busy machine reads the median low), the figure their median with
    their spread. The brief figure is kept in the ceilings cache under the machine key and read by every
    later run, unless ``refresh`` (default: XPUBENCH_REFRESH, `run --refresh`): the bound holds still from
    run to run (it moved from 41% to 22% of it for the same tg when each run measured its own). A failure is
    one note, and the share stays n/a."""
    from xpubench.ceilings.measure import with_ceilings

    refresh = refresh_asked() if refresh is None else refresh
    by_rate = sorted(record["bandwidth"], key=lambda k: record["bandwidth"][k]["bytes_per_s"])
    known = {key.split("/", 1)[1]: key for key in by_rate}   # each device's fastest: the one its bound reads
    devices: dict[str, str] = {}
    for c in cases:
        if _bandwidth_bound(c) and c.backend in with_ceilings():
            devices.setdefault(c.device, c.backend)
    key = cache.machine_key(env)
    for device, backend in devices.items():
        name = known.get(device) or f"{backend}/{device}"
        if device not in known:
            kept = None if refresh else cache.cached_brief(cache.lookup(key, path)[0], backend, device)
            entry = _brief(env, backend, device, key, path, on_note) if kept is None else _bandwidth_entry(
                kept["gb_per_s"], kept["written"], fresh=False)
            if entry is None:
                continue
            record["bandwidth"][name] = entry
        if on_note:
            entry = record["bandwidth"][name]
            on_note(f"the decode bound's bandwidth on {device}: {bandwidth_said(entry)} ({name.split('/')[0]}'s "
                    f"copy/triad, {entry.get('source') or 'xpubench ceilings'})")


def _brief(env: dict, backend: str, device: str, key: dict, path: Path | None,
           on_note: Callable[[str], None] | None) -> dict[str, Any] | None:
    """The brief bandwidth measured now and kept (its record entry), or None (said in a note)."""
    from xpubench.ceilings.measure import _spec_bandwidth, brief_bandwidths

    try:
        measured = brief_bandwidths(backend, device, measurements=BRIEF_MEASUREMENTS, budget_s=BRIEF_BANDWIDTH_S,
                                    spec_bytes_per_s=_spec_bandwidth(env, backend, device), timeout_s=BRIEF_TIMEOUT_S)
        values = [bw.best_gb_per_s for bw in measured if bw.best_gb_per_s]
        if not values:
            raise RuntimeError("no kernel computed a right result")
    except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as exc:
        if on_note:
            on_note(f"the brief bandwidth of {backend} {device} was not measured ({exc}): the share of the "
                    "bandwidth bound is n/a; `xpubench ceilings` measures it")
        return None
    try:
        cache.store(key, path=path, briefs={f"{backend}/{device}": values})
    except OSError as exc:   # used all the same; the next run measures again
        if on_note:
            on_note(f"the brief bandwidth of {backend} {device} is not kept: the cache cannot be written "
                    f"({exc.strerror or exc})")
    return _bandwidth_entry(values, utc_now(), fresh=True)


def _bandwidth_entry(values: list[float], written: str, fresh: bool) -> dict[str, Any]:
    return {"bytes_per_s": statistics.median(values) * 1e9, "written": written, "spread": cache.spread(values),
            "fresh": fresh, "source": f"a run's brief one, the median of {len(values)} measurements' fastest windows"}


def bandwidth_said(entry: dict[str, Any]) -> str:
    """A bandwidth of the ceilings record as its reader is told it: "25.2 GB/s (cached 2026-12-07, ±3%)", or
    "(measured now, ±3%)" when this run measured it."""
    when = when_said(entry)
    return f"{entry['bytes_per_s'] / 1e9:,.1f} GB/s" + (f" ({when})" if when else "")


def when_said(entry: dict[str, Any], now: str = "measured now") -> str:
    """"cached 2026-12-07, ±3%" or "measured now, ±3%" (``now``) of a kept figure's record entry; "" for an
    entry of an older record, which says neither."""
    when = now if entry.get("fresh") else f"cached {str(entry['written'])[:10]}" if entry.get("written") else None
    return ", ".join(p for p in (when, f"±{entry['spread']:.0%}" if entry.get("spread") is not None else None) if p)
