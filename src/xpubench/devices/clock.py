"""The clock a CPU core really runs at under load, measured, for the CPU peak estimate (devices/cpu_peak.py).

Why: under a hypervisor /proc/cpuinfo's "cpu MHz" is often the base clock (2.60 GHz on the project's
AMD EPYC VMs) while the cores boost far above it (3.66 GHz measured on Zen 4, >= 4.0 GHz on Zen 5), so a
peak built from it is exceeded by real matmuls. No portable API reads the running clock inside a VM.

How: time a chain of dependent integer operations whose latency every core shares. One round is
``x = (x + y) ^ z`` on 32-bit integers: an add and an xor, each waiting for the one before, and each
one cycle on every x86-64 core (Intel since the P6, AMD since the K7) and every AArch64 core of the last
decade. XLA compiles it (``lax.fori_loop``, 16 rounds per iteration) into a loop of register-register
``add``/``xor`` pairs; nothing folds it (the operands are runtime values and ``+`` and ``^`` do not
associate with each other). Two loop lengths are timed, each the fastest of ``REPEATS`` calls (an
interrupted call is only slower); the slope between them removes the call's fixed cost:
clock = 2 cycles x extra rounds / extra seconds.

What it is: the clock of one busy core (a single-core boost). With every core busy a CPU may run slower,
so the estimate built on it is an upper bound for the whole CPU, which is what a peak must be.
Without JAX (or when its CPU backend cannot run) there is no measurement: None. It runs in a child process
(``python -m xpubench.devices.clock``, ``measured_mhz``): JAX and XLA's CPU client (~170 MB) are held there,
never by the process that asks (``xpubench serve`` records the host's facts itself, and peaked at ~250 MB with
JAX inside it where the clock was not cached yet).

Kept (``cpu_clock``): the clock is measured ``MEASUREMENTS`` times, its figure is their median with their
spread (half their range over the median), and it is cached per CPU (``cpu.cpu_identity``: model, flags,
cores, cpufreq's maximum) in ``$XDG_CACHE_HOME/xpubench/cpu-clock.json`` with the time it was measured.
Every later detection reads it, so the CPU peak estimate holds still from one command to the next (it
moved 398 / 442 / 451 / 453 GFLOP/s when each command measured again); ``--refresh`` (or
``XPUBENCH_REFRESH=1``) measures it again. What each figure is, cached or measured now, is said beside it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from xpubench import readfile
from xpubench.devices.cpu import cpu_identity
from xpubench.envnames import cache_folder
from xpubench.errors import UserError
from xpubench.legible.units import utc_now
from xpubench.results.validate import JSON, TEXT, Invalid, list_of, map_of, number, record

CYCLES_PER_ROUND = 2          # one add + one xor, each 1 cycle of latency
ROUNDS_PER_ITERATION = 16
ITERATIONS = (2_000, 22_000)  # the two loop lengths (the longer: ~0.2 ms at 3.6 GHz)
REPEATS = 25
MEASUREMENTS = 5              # independent ones: the clock is their median, their spread said beside it
WARM_S = 0.05                 # busy time before timing, so a power-saving core has ramped its clock up
SANE_GHZ = (0.2, 10.0)        # outside this the measurement is rejected (a broken timer or compiler)
METHOD = ("a dependent chain of 32-bit adds and xors (1 cycle each) compiled by XLA, timed on one busy core: "
          f"the fastest of {REPEATS} calls at two lengths, clock = extra cycles / extra seconds; the median of "
          f"{MEASUREMENTS} such measurements")
FORMAT = 1
MAX_BYTES = 1 << 20
MAX_ENTRIES = 8               # CPUs kept (another container's or VM's CPU shares the home folder)
CHILD_TIMEOUT_S = 120.0       # the measuring child: JAX's import, two compiles, 5 x 25 x 2 short calls


def _chain(iterations: int):
    import jax
    from jax import lax

    def run(x, y, z):
        def body(_, x):
            for _ in range(ROUNDS_PER_ITERATION):
                x = (x + y) ^ z
            return x
        return lax.fori_loop(0, iterations, body, x)

    return jax.jit(run)


def _fastest(fn, args, repeats: int, clock=time.perf_counter) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        fn(*args).block_until_ready()
        best = min(best, clock() - start)
    return best


def slope_ghz(short_s: float, long_s: float, iterations: tuple[int, int] = ITERATIONS) -> float | None:
    """The clock from the fastest times of the two loop lengths, or None when they make no sense."""
    extra = long_s - short_s
    if extra <= 0:
        return None
    ghz = CYCLES_PER_ROUND * ROUNDS_PER_ITERATION * (iterations[1] - iterations[0]) / extra / 1e9
    return ghz if SANE_GHZ[0] <= ghz <= SANE_GHZ[1] else None


def measured_mhz(timeout_s: float = CHILD_TIMEOUT_S) -> tuple[list[float], str]:
    """``measured_here`` in a child process (this module run with ``-m``): (MHz per measurement, how) or
    ([], why not), a child that failed or ran past ``timeout_s`` included."""
    try:
        proc = subprocess.run([sys.executable, "-m", "xpubench.devices.clock"], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return [], f"not measured (its process ran past {timeout_s:g} s)"
    try:
        samples, method = json.loads(proc.stdout)
        return [float(s) for s in samples], str(method)
    except (ValueError, TypeError):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:120]
        return [], f"not measured (its process ended with code {proc.returncode}: {tail})"


def measured_here(measurements: int = MEASUREMENTS) -> tuple[list[float], str]:
    """(the clock of one busy core in MHz, once per measurement, how it was measured) or ([], why not), in
    this process (JAX imported here). Each is the slope of the fastest of REPEATS interleaved calls at the two
    lengths."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # as detection imports JAX
    found, odd = [], []
    try:
        import jax
        import jax.numpy as jnp

        with jax.default_device(jax.devices("cpu")[0]):
            args = (jnp.uint32(1), jnp.uint32(0x9E3779B9), jnp.uint32(0x7F4A7C15))
            short, long = (_chain(n) for n in ITERATIONS)
            short(*args).block_until_ready()
            end = time.perf_counter() + WARM_S
            while time.perf_counter() < end:
                long(*args).block_until_ready()
            for _ in range(measurements):
                times = [float("inf"), float("inf")]
                for _ in range(REPEATS):   # interleaved: a slow spell of the machine touches both lengths
                    times = [min(t, _fastest(fn, args, 1)) for t, fn in zip(times, (short, long))]
                ghz = slope_ghz(*times)
                found += [round(ghz * 1000, 1)] if ghz is not None else []
                odd += [] if ghz is not None else [f"{times[0]:.2e} s and {times[1]:.2e} s"]
    except Exception as exc:  # noqa: BLE001 - no JAX, no CPU backend: no measurement, said why
        return [], f"not measured ({type(exc).__name__}: {str(exc).strip()[:120]})"
    if not found:
        return [], f"not measured (timings {odd[0]} make no sense)"
    return found, METHOD


def cpu_clock(cpu: dict[str, Any], *, refresh: bool = False, environ: Mapping[str, str] = os.environ,
              measure: Callable[[], tuple[list[float], str]] | None = None,
              path: Path | None = None) -> dict[str, Any]:
    """The clock of one busy core as a figure that holds still: {"mhz": the median of the measurements,
    "spread": half their range / the median, "samples_mhz", "measured_at", "fresh": measured by this call,
    "method"}. The figure cached for this CPU (``cpu_identity``) is used unless ``refresh``; otherwise it is
    measured and kept (an unwritable cache: said in "unkept", the figure used all the same). {"mhz": None,
    "method": why} where it can't be measured."""
    path = path or cache_path(environ)
    key = cpu_identity(cpu)
    entries = _entries(path)
    kept = None if refresh else next((e for e in entries if e["cpu"] == key), None)
    if kept is not None:
        return _figure(kept, fresh=False)
    samples, method = (measure or measured_mhz)()
    if not samples:
        return {"mhz": None, "method": method}
    entry = {"cpu": key, "samples_mhz": samples, "measured_at": utc_now(), "method": method}
    figure = _figure(entry, fresh=True)
    try:
        _store([e for e in entries if e["cpu"] != key] + [entry], path)
    except OSError as exc:   # measured all the same: used, and said why it is not kept
        figure["unkept"] = f"not kept: {path} cannot be written ({exc.strerror or exc})"
    return figure


def cache_path(environ: Mapping[str, str] = os.environ) -> Path:
    return cache_folder(environ) / "cpu-clock.json"


def _figure(entry: dict, fresh: bool) -> dict[str, Any]:
    samples = entry["samples_mhz"]
    mhz = statistics.median(samples)
    return {"mhz": round(mhz, 1), "spread": (max(samples) - min(samples)) / 2 / mhz, "samples_mhz": samples,
            "measured_at": entry["measured_at"], "fresh": fresh, "method": entry["method"]}


ENTRY = record({"cpu": map_of(JSON), "samples_mhz": list_of(number(SANE_GHZ[0] * 1000, SANE_GHZ[1] * 1000)),
                "measured_at": TEXT, "method": TEXT}, required=("cpu", "samples_mhz", "measured_at", "method"))


def _entries(path: Path) -> list[dict]:
    """The cache's entries; a missing, unreadable or hand-broken file holds none (it is rewritten on store)."""
    try:
        data = readfile.loads_json(readfile.read_bytes(path, "clock cache", MAX_BYTES), str(path))
        entries = data["entries"] if isinstance(data, dict) and data.get("format") == FORMAT else []
        for i, entry in enumerate(entries):
            ENTRY(entry, f"entries[{i}]")
        return [e for e in entries if e["samples_mhz"]]
    except (UserError, Invalid, KeyError, TypeError):
        return []


def _store(entries: list[dict], path: Path) -> None:
    """Written whole to a temporary file renamed over the old one: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".cpu-clock-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"format": FORMAT, "entries": entries[-MAX_ENTRIES:]}, fh, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":   # measured_mhz's child: [samples, method] as JSON on stdout
    json.dump(measured_here(), sys.stdout)
