"""The achievable compute ceiling: a time-bounded search over matmul shapes for the highest FLOP/s.

A spec-sheet peak is what a chip could do; the *ceiling* is what this backend, on this device, at this
precision, was seen to do at its best (mamf-finder's "maximum achievable matmul FLOPS"). Every other
matmul, training and inference result is then ranked against it (analysis/efficiency.py, on load).

The search, for one backend x device x dtype, within ``budget_s`` (clock included, so a fake clock
tests it):

1. **Scout** (``SCOUT_SHARE`` of the budget): the candidate shapes in order (``candidate_shapes``: the
   default N x N x N sizes first, so the ceiling is never below what the fixed-size matmul cases can
   see when the budget lets them run, then the rest cheapest first). Each gets a cold call (compiles
   for JAX), a check of a few output rows against float64 numpy (a wrong kernel cannot win), then
   calibrated, device-synchronised windows (harness.timing.time_windows: the calibration windows are
   the warm-up) and ``SCOUT_WINDOWS`` kept windows. A shape whose predicted cost no longer fits what
   is left of the scout budget is skipped, and the search goes on with the next one.
2. **Confirm** (the rest): the ``CONFIRM_TOP`` fastest scouted shapes are measured again with
   ``CONFIRM_WINDOWS`` windows each; their confirm samples replace the scout samples.
3. The ceiling is the shape with the highest *median* FLOP/s; its spread (CV and the bootstrap 95%
   interval of the median, as rates) and raw seconds-per-product samples are kept, and so is every
   shape tried. Taking the best of several medians favours a lucky shape a little (the winner's curse);
   the confirm pass re-measures the leaders to keep that small.

Shapes: the square default sizes, multiples of common tile sizes (128 / 256 on accelerators, 256 / 512
on CPUs), and a few M x K x N shapes with a short or a long K, or a wide or tall output. The adapter
is the backend's usual ``MatmulOps`` plus one function, ``make_inputs(m, k, n)``: ``GemmOps``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from xpubench.harness.matmul import CHECK_ROWS, MatmulOps
from xpubench.harness.timing import Clock, time_windows, timed
from xpubench.results.stats import summarize

Shape = tuple[int, int, int]   # (M, K, N): A is M x K, B is K x N

DEFAULT_BUDGET_S = {"cpu": 30.0, "accelerator": 60.0}   # per dtype
SCOUT_SHARE = 0.6
SCOUT_WINDOWS = 2
CONFIRM_TOP = 3
CONFIRM_WINDOWS = 7
MIN_WINDOW_S = 0.1
CPU_SHAPES: tuple[Shape, ...] = (
    (1536, 1536, 1536), (2560, 2560, 2560), (3072, 3072, 3072),        # 512 / 256 tile multiples
    (2048, 512, 2048), (4096, 1024, 4096),                              # short K (skinny inner product)
    (1024, 4096, 1024), (2048, 8192, 2048),                             # long K
    (4096, 2048, 1024), (1024, 2048, 4096),                             # wide and tall output
)
ACCEL_SHAPES: tuple[Shape, ...] = (
    (6144, 6144, 6144), (12288, 12288, 12288), (16384, 16384, 16384),  # 128 / 256 tile multiples
    (8192, 2048, 8192), (16384, 4096, 16384),                           # short K
    (4096, 16384, 4096), (8192, 32768, 8192),                           # long K
    (16384, 8192, 4096), (4096, 8192, 16384),                           # wide and tall output
)


def flops(shape: Shape) -> float:
    m, k, n = shape
    return 2.0 * m * k * n


def input_bytes(shape: Shape, element_bytes: int) -> int:
    """A, B and the output C: what one product needs resident."""
    m, k, n = shape
    return (m * k + k * n + m * n) * element_bytes


def candidate_shapes(default_sizes: Sequence[int], accelerator: bool = False, *, element_bytes: int = 4,
                     memory_bytes: int | None = None, memory_share: float = 0.15) -> list[Shape]:
    """The shapes to try: the default N x N x N sizes (ascending), then the tile-multiple and non-square
    table above, cheapest first; shapes whose inputs and output would take more than ``memory_share``
    of ``memory_bytes`` are left out (the search keeps the inputs of up to four shapes at once)."""
    defaults = sorted({(n, n, n) for n in default_sizes})
    rest = sorted(set(ACCEL_SHAPES if accelerator else CPU_SHAPES) - set(defaults), key=lambda s: (flops(s), s))
    fits = (lambda s: input_bytes(s, element_bytes) <= memory_share * memory_bytes) if memory_bytes else bool
    return [s for s in defaults + rest if fits(s)]


@dataclass
class GemmOps:
    """A backend's ``MatmulOps`` (product, sync, host copy, placement, tolerance) plus inputs of any
    shape: ``make_inputs(m, k, n)`` -> (A of m x k, B of k x n), on the device, ready."""

    matmul: MatmulOps
    make_inputs: Callable[[int, int, int], tuple[Any, Any]]
    element_bytes: int = 4
    memory_bytes: int | None = None      # free memory of the device, to leave out shapes that cannot fit


def shaped_inputs_numpy(m: int, k: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Standard-normal fp32 A (m x k) and B (k x n): the host data every backend converts."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32))


@dataclass
class ShapeRun:
    """One shape's measurement: raw seconds per product (one per window) from its last phase."""

    shape: Shape
    phase: str                            # "scout" | "confirm"
    samples_s: list[float]
    reps: int
    cold_s: float | None = None
    error: str | None = None              # why the shape has no figure (wrong result, out of memory, ...)

    @property
    def median_flops_per_s(self) -> float | None:
        return flops(self.shape) / float(np.median(self.samples_s)) if self.samples_s else None

    def as_dict(self) -> dict:
        out = asdict(self)
        out["shape"] = list(self.shape)
        out["median_flops_per_s"] = self.median_flops_per_s
        return out


@dataclass
class Ceiling:
    """The highest median FLOP/s of the search and how it was found; JSON round-trips via as_dict /
    from_dict (the cache stores it)."""

    backend: str
    device: str
    precision: str
    flops_per_s: float | None                  # median rate of the best shape (None: nothing measured)
    shape: Shape | None
    best_window_flops_per_s: float | None      # the fastest single window of that shape
    cv: float | None                           # stdev / mean of that shape's window times
    ci95_low_flops_per_s: float | None         # bootstrap 95% interval of the median, as rates
    ci95_high_flops_per_s: float | None
    samples_s: list[float] = field(default_factory=list)   # the best shape's raw seconds per product
    shapes: list[dict] = field(default_factory=list)       # every shape tried (ShapeRun.as_dict)
    skipped: list[str] = field(default_factory=list)       # shapes left out and why
    budget_s: float = 0.0
    elapsed_s: float = 0.0
    warning: str | None = None

    def as_dict(self) -> dict:
        out = asdict(self)
        out["shape"] = list(self.shape) if self.shape else None
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Ceiling:
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        values["shape"] = tuple(values["shape"]) if values.get("shape") else None
        return cls(**values)

    @property
    def rel_noise(self) -> float | None:
        """Relative half-width of the 95% interval of the ceiling's median (0.03 = +-3%)."""
        if not (self.flops_per_s and self.ci95_low_flops_per_s and self.ci95_high_flops_per_s):
            return None
        return (self.ci95_high_flops_per_s - self.ci95_low_flops_per_s) / 2 / self.flops_per_s


def _check(ops: GemmOps, a: Any, b: Any, out: Any) -> str | None:
    mm = ops.matmul
    a_rows = mm.to_numpy(a)[:CHECK_ROWS].astype(np.float64)
    ref = a_rows @ mm.to_numpy(b).astype(np.float64)
    got = mm.to_numpy(out)[:CHECK_ROWS]
    error = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
    return None if error <= mm.tolerance else f"wrong result: relative error {error:.2e} > {mm.tolerance:.0e}"


def _measure_shape(ops: GemmOps, shape: Shape, windows: int, max_s: float, clock: Clock, check: bool,
                   prepared: dict) -> ShapeRun:
    """Cold call and check on first sight of a shape; then calibration (the warm-up) and ``windows``
    timed windows."""
    mm = ops.matmul
    cold_s = None
    if shape not in prepared:
        a, b = ops.make_inputs(*shape)
        holder: dict[str, Any] = {}

        def first():
            holder["out"] = mm.product(a, b)
            return holder["out"]

        cold_s = timed(first, mm.sync, clock=clock)
        problem = _check(ops, a, b, holder.pop("out")) if check else None
        if problem:
            return ShapeRun(shape, "scout", [], 0, cold_s, problem)
        prepared[shape] = (a, b)
    a, b = prepared[shape]
    w = time_windows(lambda: mm.product(a, b), mm.sync, min_window_s=MIN_WINDOW_S, n_windows=windows,
                     min_windows=min(windows, 2), max_total_s=max_s, clock=clock)
    return ShapeRun(shape, "", w.samples, w.reps, cold_s)


def _predicted_s(shape: Shape, rate: float | None, windows: int, cold: bool = True) -> float:
    """What measuring a shape is expected to cost: cold call, calibration and windows."""
    if not rate:
        return 0.0
    per_call = flops(shape) / rate
    return per_call * cold + max(per_call, MIN_WINDOW_S) * (windows + 1)


def search_ceiling(ops: GemmOps, shapes: Sequence[Shape], *, backend: str, device: str, precision: str,
                   budget_s: float, clock: Clock = time.perf_counter, check: bool = True) -> Ceiling:
    """Run the scout (``shapes`` in the order given) and confirm passes within ``budget_s`` seconds.

    A shape that fails (wrong result, out of memory, a framework error) is recorded with its error and
    the search goes on; the ceiling is None only when no shape could be measured.
    """
    start = clock()
    scout_end = start + SCOUT_SHARE * budget_s
    runs: dict[Shape, ShapeRun] = {}
    skipped: list[str] = []
    prepared: dict[Shape, tuple[Any, Any]] = {}
    best_rate: float | None = None
    for shape in shapes:
        left = scout_end - clock()
        if runs and _predicted_s(shape, best_rate, SCOUT_WINDOWS) > left:
            skipped.append(f"{_fmt(shape)}: not enough scout budget left")
            continue
        try:
            run = _measure_shape(ops, shape, SCOUT_WINDOWS, max(left, 0.0), clock, check, prepared)
        except Exception as exc:  # noqa: BLE001 - one shape's failure (e.g. out of memory) is recorded
            run = ShapeRun(shape, "scout", [], 0, None, f"{type(exc).__name__}: {str(exc)[:200]}")
            prepared.pop(shape, None)
        run.phase = "scout"
        runs[shape] = run
        if run.median_flops_per_s:
            best_rate = max(best_rate or 0.0, run.median_flops_per_s)
        leaders = _leaders(runs)
        for other in [s for s in prepared if s not in {r.shape for r in leaders}]:
            del prepared[other]    # keep device memory for the shapes that may be confirmed
    leaders = _leaders(runs)
    for j, lead in enumerate(leaders):
        left = start + budget_s - clock()
        share = left / (len(leaders) - j)
        if share < _predicted_s(lead.shape, lead.median_flops_per_s, 2, cold=False):
            skipped.append(f"{_fmt(lead.shape)}: no budget left to confirm (scout figure kept)")
            continue
        try:
            run = _measure_shape(ops, lead.shape, CONFIRM_WINDOWS, share, clock, False, prepared)
        except Exception as exc:  # noqa: BLE001 - the scout figure stands
            skipped.append(f"{_fmt(lead.shape)}: confirm failed ({type(exc).__name__}; scout figure kept)")
            continue
        run.phase, run.cold_s = "confirm", lead.cold_s
        runs[lead.shape] = run
    prepared.clear()
    return _ceiling(list(runs.values()), skipped, backend, device, precision, budget_s, clock() - start)


def _leaders(runs: dict[Shape, ShapeRun]) -> list[ShapeRun]:
    measured = [r for r in runs.values() if r.samples_s]
    return sorted(measured, key=lambda r: -r.median_flops_per_s)[:CONFIRM_TOP]


def _ceiling(runs: list[ShapeRun], skipped: list[str], backend: str, device: str, precision: str,
             budget_s: float, elapsed_s: float) -> Ceiling:
    measured = [r for r in runs if r.samples_s]
    common = {"backend": backend, "device": device, "precision": precision, "shapes": [r.as_dict() for r in runs],
              "skipped": skipped, "budget_s": budget_s, "elapsed_s": elapsed_s}
    if not measured:
        errors = "; ".join(f"{_fmt(r.shape)}: {r.error}" for r in runs if r.error) or "no shape fitted the budget"
        return Ceiling(flops_per_s=None, shape=None, best_window_flops_per_s=None, cv=None, ci95_low_flops_per_s=None,
                       ci95_high_flops_per_s=None, warning=f"no shape measured ({errors})", **common)
    best = max(measured, key=lambda r: r.median_flops_per_s)
    s = summarize(best.samples_s)
    work = flops(best.shape)
    return Ceiling(flops_per_s=work / s.median, shape=best.shape, best_window_flops_per_s=work / s.min, cv=s.cv,
                   ci95_low_flops_per_s=work / s.ci95_high, ci95_high_flops_per_s=work / s.ci95_low,
                   samples_s=list(best.samples_s), warning=s.warning, **common)


def raise_to_observed(ceiling: Ceiling, flops_per_s: float, label: str) -> Ceiling:
    """The ceiling is the highest rate *seen*: a result of the same backend, device and dtype that ran
    faster than the search (e.g. a fixed-size matmul case of the same run) becomes the ceiling, with
    ``label`` saying where it came from. Returns a new Ceiling; the search's samples stay in ``shapes``."""
    if ceiling.flops_per_s and flops_per_s <= ceiling.flops_per_s:
        return ceiling
    data = ceiling.as_dict()
    data.update(flops_per_s=flops_per_s, shape=None, best_window_flops_per_s=None, cv=None, ci95_low_flops_per_s=None,
                ci95_high_flops_per_s=None, samples_s=[],
                warning=f"raised to {flops_per_s / 1e9:.1f} GFLOP/s seen in {label} (faster than the search's best)")
    return Ceiling.from_dict(data)


def _fmt(shape: Shape) -> str:
    return "x".join(str(d) for d in shape)
