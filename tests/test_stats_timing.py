"""Statistics and timed windows on a fake clock: no real time is measured here."""

import math

import pytest

from xpubench.harness.stats import summarize
from xpubench.harness.timing import time_windows, timed


class FakeClock:
    """A clock that only moves when the code under test 'runs' something."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_summary_of_known_samples():
    s = summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert s.n == 5 and s.median == 3.0 and s.mean == 3.0
    assert s.q1 == 2.0 and s.q3 == 4.0 and s.iqr == 2.0
    assert math.isclose(s.stdev, math.sqrt(2.5))
    assert math.isclose(s.cv, math.sqrt(2.5) / 3.0)
    assert s.min == 1.0 and s.max == 5.0 and s.p90 == pytest.approx(4.6)
    assert s.ci95_low <= s.median <= s.ci95_high
    assert s.warning and "unstable" in s.warning  # cv 53% >= 10%


def test_stable_samples_have_no_warning_and_tight_ci():
    s = summarize([1.00, 1.01, 0.99, 1.00, 1.02, 0.98, 1.00])
    assert s.warning is None
    assert 0.98 <= s.ci95_low <= 1.0 <= s.ci95_high <= 1.02


def test_too_few_samples_warn():
    assert "only 2" in summarize([1.0, 1.0]).warning
    with pytest.raises(ValueError):
        summarize([])


def test_bootstrap_interval_is_deterministic():
    data = [1.0, 1.3, 0.9, 1.1, 1.7, 1.0]
    assert summarize(data).ci95_low == summarize(data).ci95_low


def test_timed_includes_the_sync():
    clock = FakeClock()

    def fn():
        clock.now += 0.25       # the launch
        return "out"

    def sync(out):
        assert out == "out"
        clock.now += 0.75       # the device finishing
    assert timed(fn, sync, clock=clock) == pytest.approx(1.0)


def test_windows_calibrate_reps_and_divide_by_them():
    clock = FakeClock()
    syncs = []

    def fn():
        clock.now += 0.001      # 1 ms per call

    w = time_windows(fn, lambda _: syncs.append(clock.now), min_window_s=0.05, n_windows=5, clock=clock)
    assert w.reps >= 50 and w.calibration[-1][1] >= 0.05
    assert len(w.samples) == 5
    assert all(s == pytest.approx(0.001) for s in w.samples)
    # one sync per window (calibration windows included), never per call
    assert len(syncs) == len(w.calibration) + 5


def test_window_budget_truncates_but_keeps_minimum():
    clock = FakeClock()

    def fn():
        clock.now += 2.0        # a slow call: 2 s

    w = time_windows(fn, lambda _: None, min_window_s=0.05, n_windows=10, min_windows=3, max_total_s=5.0,
                     clock=clock)
    assert w.reps == 1
    assert len(w.samples) == 3 and w.truncated
    assert all(s == pytest.approx(2.0) for s in w.samples)
