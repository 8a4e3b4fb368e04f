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
written; per "backend/device" the measured bytes/s. ``analysis/ceilings.py`` ranks the results
against it when a file is loaded.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from xpubench import backends
from xpubench.ceilings import cache
from xpubench.ceilings.measure import ceilings_for
from xpubench.results.modes import mode_of

BRIEF_BANDWIDTH_S = 1.5   # copy + triad, both kernels, of the brief bandwidth a run measures itself
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
            record["bandwidth"][f"{backend}/{device}"] = {"bytes_per_s": bw.gb_per_s * 1e9, "written": written}
    if record["missing"]:
        where = str(path or cache.cache_path())   # the record goes into a results file: no local path in it
        problem = problem and problem.replace(f" at {where}", "").replace(f" {where}", "")
        record["note"] = (f"no measured ceiling for {', '.join(record['missing'])}"
                          + (f" ({problem})" if problem else "") + f": {HOW}")
    return record


def brief_bandwidth(record: dict[str, Any], env: dict, cases: Iterable,
                    on_note: Callable[[str], None] | None = None) -> None:
    """A generation case's device with no bandwidth in ``record`` gets a brief one, measured now (copy and
    triad for ``BRIEF_BANDWIDTH_S`` in a child process of the first of its backends that has a ceiling
    adapter, harness/bandwidth.py; not cached: ``xpubench ceilings`` measures the full figure). Its entry
    says so (``source``); the share of the bandwidth bound (analysis/generation.py) then has a value. A
    failure is one note, and the share stays n/a."""
    from xpubench.ceilings.measure import _spec_bandwidth, measure_in_subprocess, with_ceilings

    known = {key.split("/", 1)[1] for key in record["bandwidth"]}
    devices: dict[str, str] = {}
    for c in cases:
        if _bandwidth_bound(c) and c.device not in known and c.backend in with_ceilings():
            devices.setdefault(c.device, c.backend)
    for device, backend in devices.items():
        try:
            _, bw = measure_in_subprocess(backend, device, [], with_bandwidth=True, timeout_s=BRIEF_TIMEOUT_S,
                                          bandwidth_budget_s=BRIEF_BANDWIDTH_S,
                                          spec_bytes_per_s=_spec_bandwidth(env, backend, device))
        except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as exc:
            if on_note:
                on_note(f"the brief bandwidth of {backend} {device} was not measured ({exc}): the share of the "
                        "bandwidth bound is n/a; `xpubench ceilings` measures it")
            continue
        if bw is not None and bw.best_gb_per_s:   # the fastest window: a brief figure is a bound's ceiling
            record["bandwidth"][f"{backend}/{device}"] = {
                "bytes_per_s": bw.best_gb_per_s * 1e9, "written": None,
                "source": f"a brief copy/triad before this run, its fastest window of {bw.elapsed_s:.1f} s"}
