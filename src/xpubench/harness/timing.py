"""Device-synchronised timed windows with a calibrated number of repetitions.

A *window* runs ``fn`` ``reps`` times back to back and then waits for the device (``sync``) before the
clock is read again, so every window holds finished device work only. One sample = window time / reps
(seconds per call). ``reps`` is calibrated (doubled, as pyperf does) until a window lasts at least
``min_window_s``, which keeps clock resolution and launch jitter out of short operations.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Clock = Callable[[], float]


@dataclass
class Windows:
    samples: list[float] = field(default_factory=list)   # seconds per call, one per window
    reps: int = 1                                          # calls per window
    calibration: list[tuple[int, float]] = field(default_factory=list)  # (reps, window seconds) tried
    truncated: bool = False                                # the time budget cut the sample count short


def timed(fn: Callable[[], Any], sync: Callable[[Any], None], clock: Clock = time.perf_counter) -> float:
    """Seconds for one call of ``fn`` including the wait for its device work."""
    start = clock()
    sync(fn())
    return clock() - start


def time_windows(
    fn: Callable[[], Any],
    sync: Callable[[Any], None],
    *,
    min_window_s: float = 0.05,
    n_windows: int = 7,
    min_windows: int = 3,
    max_total_s: float = 10.0,
    max_reps: int = 1 << 20,
    clock: Clock = time.perf_counter,
) -> Windows:
    """Calibrate ``reps`` then collect ``n_windows`` samples (at least ``min_windows``) within ``max_total_s``.

    Call this after the warm-up: calibration windows are not kept as samples.
    """
    out = Windows()
    begin = clock()

    def window(reps: int) -> float:
        start = clock()
        result = None
        for _ in range(reps):
            result = fn()
        sync(result)
        return clock() - start

    reps = 1
    while True:
        elapsed = window(reps)
        out.calibration.append((reps, elapsed))
        if elapsed >= min_window_s or reps >= max_reps or clock() - begin > max_total_s / 2:
            break
        # jump close to the target, but at most x10 per round so one noisy window can't overshoot far
        reps = min(max_reps, max(reps * 2, min(reps * 10, int(reps * min_window_s / max(elapsed, 1e-9)) + 1)))
    out.reps = reps
    for i in range(n_windows):
        if i >= min_windows and clock() - begin > max_total_s:
            out.truncated = True
            break
        out.samples.append(window(reps) / reps)
    return out
