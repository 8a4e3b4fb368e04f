"""The verdicts of ``xpubench doctor``: raw measurements (doctor/probe.py) in, PASS / WARN / FAIL rows
out. Pure functions of numbers, so every check can be shown to fail (tests/test_doctor.py).

Thresholds, and why:
- timing: on an asynchronous device a window read without the sync must take at most half the
  synchronised one; CUDA events and synchronised wall time must agree within ``EVENT_TOLERANCE``
  (wall time adds one launch and one sync, microseconds against windows of >= 0.1 s).
- precision: the error of an n x n product against float64 (on the inputs as the device holds them),
  as bits: -log2(max |error| / max |result|). Simulated with numpy for n = 512-2048: fp32 21 bits
  (accumulation error only), TF32 and fp16 11-12 (10-bit mantissas), bf16 8.6-9.1 (7-bit mantissa).
  ``BANDS`` put the boundaries half-way between formats.
- ceiling: the chip's spec peak is a ceiling no honest measurement passes (above it: a timing bug or
  a wrong table row). A CPU's peak is an estimate whose clock may be below the boost clock: WARN.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from xpubench.legible.units import fmt_flops

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"
ORDER = {PASS: 0, WARN: 1, FAIL: 2}
EVENT_TOLERANCE = 0.10
BANDS = {"fp32": (16.0, math.inf), "tf32": (10.0, 14.0), "fp16": (10.0, 14.0), "bf16": (6.0, 10.0)}
FORMAT_OF = [(16.0, "fp32"), (10.0, "a 10-bit mantissa (tf32/fp16)"), (6.0, "bf16"), (-math.inf, "worse than bf16")]


@dataclass
class Row:
    check: str
    status: str
    reason: str
    backend: str = "-"
    device: str = "-"
    details: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def worst(statuses) -> str:
    return max(statuses, key=ORDER.__getitem__, default=PASS)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def placement(requested: str, found: str) -> Row:
    from xpubench.case import Case
    from xpubench.launch.runner import placement_problem

    problem = placement_problem(Case(workload="matmul", backend="-", device=requested, mode="matmul"), found)
    if problem:
        return Row("placement", FAIL, f"the work {problem} (a silent fallback)", details={"placement": found})
    return Row("placement", PASS, f"a product's result lives on {found}", details={"placement": found})


def timing(asynchronous: bool, t: dict) -> Row:
    dispatch, synced = t["dispatch_s"], t["synced_s"]
    said = f"{t['reps']} products of N={t['n']}: {_ms(dispatch)} without the sync, {_ms(synced)} with it"
    if asynchronous and not dispatch <= 0.5 * synced:
        return Row("timing", FAIL, f"{said}: the unsynchronised window is not shorter, so the sync did not wait "
                   "for the device (or the device ran synchronously)", details=t)
    row = Row("timing", PASS, (f"asynchronous device, the sync waits: {said}" if asynchronous else
                               f"synchronous device (calls return when done): {said}"), details=t)
    if "event_s" in t:
        event, wall = t["event_s"], t["event_wall_s"]
        off = abs(wall - event) / wall
        if off > EVENT_TOLERANCE:
            return Row("timing", FAIL, f"CUDA events {_ms(event)} vs synchronised wall time {_ms(wall)}: "
                       f"{off:.0%} apart (tolerance {EVENT_TOLERANCE:.0%})", details=t)
        row.reason += f"; CUDA events {_ms(event)} vs wall {_ms(wall)} ({off:.1%} apart)"
    return row


def bits(error: float) -> float:
    return math.inf if error <= 0 else -math.log2(error)


def precision(errors: dict[str, float]) -> Row:
    parts, bad = [], []
    for dtype, error in errors.items():
        b = bits(error)
        low, high = BANDS[dtype]
        parts.append(f"{dtype} {b:.1f} bits")
        if not low <= b < high:
            like = next(name for floor, name in FORMAT_OF if b >= floor)
            bad.append(f"{dtype}'s error {error:.2e} ({b:.1f} bits) is that of {like}, not of {dtype} "
                       f"({low:g}-{high:g} bits)")
    if bad:
        return Row("precision", FAIL, "; ".join(bad), details=errors)
    return Row("precision", PASS, "error vs float64 matches each format: " + ", ".join(parts), details=errors)


def ceiling(measured: dict[str, float], peaks: dict[str, tuple[float | None, bool]], name: str) -> Row:
    statuses, parts = [], []
    for dtype, flops in measured.items():
        peak, estimate = peaks.get(dtype, (None, False))
        if not peak:
            statuses.append(WARN)
            parts.append(f"{dtype} {fmt_flops(flops)}: no spec peak for {name} at {dtype}, nothing to check")
            continue
        share = flops / peak
        label = "estimated peak" if estimate else "spec peak"
        if share > 1:
            statuses.append(WARN if estimate else FAIL)
            why = ("the estimate's clock is below the clock the CPU ran at" if estimate
                   else "a timing bug or a wrong table row")
            parts.append(f"{dtype} {fmt_flops(flops)} is {share:.0%} of the {label} {fmt_flops(peak)}: {why}")
        else:
            statuses.append(PASS)
            parts.append(f"{dtype} {fmt_flops(flops)} = {share:.0%} of the {label} {fmt_flops(peak)}")
    return Row("ceiling", worst(statuses), "; ".join(parts), details={"measured": measured})


def memory(m: dict) -> Row:
    """The peak counter must rise with memory that is really new (docs/accelerators.md, the memory check).

    ``m`` is memory_probe's: ``chunks`` allocations of ``allocated`` bytes each, held together; the
    independent in-use reading before (``baseline``) and after (``in_use``). The counter fails when it
    rose by less than the in-use reading (it misses memory), or by less than one chunk where there is no
    in-use reading; when the in-use reading itself never rose by a chunk (the allocator recycled every
    chunk) the check cannot tell and WARNs."""
    peak, baseline, allocated = m.get("peak"), m.get("baseline") or 0, m["allocated"]
    chunks, in_use = m.get("chunks", 1), m.get("in_use")
    if peak is None:
        return Row("memory", WARN, "the peak counter gave no figure (MPS keeps none; XLA's cannot be reset and had "
                   "been higher): peak memory is n/a in such results", details=m)
    grew, seen = peak - baseline, (in_use - baseline if in_use is not None else None)
    held = f"{chunks} x {allocated / 2**20:.0f} MiB" if chunks > 1 else f"{allocated / 2**20:.0f} MiB"
    said = f"held {held}; the peak counter rose by {grew / 2**20:.0f} MiB"
    if seen is not None:
        said += f", the in-use reading by {seen / 2**20:.0f} MiB"
    if seen is not None and seen >= 0.9 * allocated and grew < 0.9 * seen:
        return Row("memory", FAIL, f"{said}: the peak counter misses memory in use", details=m)
    if seen is not None and seen < 0.9 * allocated and grew >= 0.9 * seen:
        return Row("memory", WARN, f"{said}: the allocator handed back memory it already held for all {chunks} "
                   "chunks, so neither reading saw new memory; the counter could not be tested (run "
                   "`xpubench doctor` in a fresh process)", details=m)
    if grew < 0.9 * allocated:
        return Row("memory", FAIL, f"{said}: it does not see the allocation", details=m)
    if chunks > 1:
        said += f" ({chunks} chunks: the allocator first handed back memory it already held)"
    return Row("memory", PASS, said, details=m)


def compilation(c: dict, backend: str) -> Row:
    if "skipped" in c:
        return Row("compile", WARN if "could not work" in c["skipped"] else PASS, f"{c['what']}: {c['skipped']}",
                   details=c)
    return Row("compile", PASS, f"{c['what']} compiled and ran a function in {c['seconds']:.2f} s", details=c)


def failed_compile(error: str, backend: str) -> Row:
    """Compiling failed: a warning where the backend's runs go on without it (its record's
    ``compile_fallback``: torch trains eager), else a failure (XLA)."""
    from xpubench import backends

    fallback = backends.record(backend).compile_fallback
    if fallback:
        return Row("compile", WARN, f"compilation failed ({error}): {fallback}")
    return Row("compile", FAIL, f"compilation failed: {error}")


def environment(environ: dict) -> Row:
    from xpubench.devices import envvars

    silent = envvars.silent_changes(environ)
    recorded = envvars.recorded(environ)
    if silent:
        return Row("environment", FAIL, "set, silently changing precision, placement or timing: " + "; ".join(silent),
                   details=recorded)
    if recorded:
        said = "; ".join(f"{k}={v} ({envvars.describe(k).changes})" for k, v in recorded.items())
        return Row("environment", WARN, f"set (recorded in every result): {said}", details=recorded)
    return Row("environment", PASS, "no variable that changes results is set", details={})


SPEED_CHECKS = ("ceiling", "known-good")   # rows whose figures are a speed other processes can slow (and a
                                           # kernels row that measured what a variable costs)


def load(busy: float | None, loaded: bool) -> Row:
    """How busy other processes kept the CPU before the checks (``busy``: backends/fingerprint.py's
    cpu_busy_fraction; ``loaded``: the share is one at which ``run`` warns too, its busy_note)."""
    if busy is None:
        return Row("load", WARN, "how busy the CPU is could not be read here (no /proc/stat): the speed figures "
                   "here hold only if nothing else was running", details={"busy": None})
    if loaded:
        return Row("load", WARN, f"other processes kept {busy:.0%} of the CPU busy before the checks: they compete "
                   "with them, so the CPU speed figures here are not a verdict on this machine (run `xpubench "
                   "doctor` again when it is quiet)", details={"busy": busy})
    return Row("load", PASS, f"other processes kept {busy:.0%} of the CPU busy before the checks: quiet enough to "
               "measure", details={"busy": busy})


def under_load(row: Row, busy: float) -> Row:
    """A speed row measured while other processes held ``busy`` of the CPU: never a plain PASS (WARN), its
    reason saying the figure is no verdict."""
    if row.check not in SPEED_CHECKS and not (row.check == "kernels" and row.details.get("costs")):
        return row
    row.reason += (f" (measured while other processes kept {busy:.0%} of the CPU busy: not a verdict on this "
                   "machine's speed)")
    row.status = worst([row.status, WARN])
    row.details = {**row.details, "busy": busy}
    return row
