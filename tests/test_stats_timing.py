"""Statistics, timed windows and the training loop on a fake clock: no real time is measured here."""

import math

import numpy as np
import pytest

from xpubench.case import Case
from xpubench.harness.timing import time_windows, timed
from xpubench.harness.training import run_training, sync_mode
from xpubench.results.stats import summarize


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


# --- the training loop (harness/training.py) on a fake trainer and a fake clock ---------------------


class FakeDevice:
    """An asynchronous device on a fake clock: a launch costs the host ``host_s``; the device then needs
    ``device_s`` per step, one step after another; a sync waits until the device has caught up."""

    def __init__(self, clock, host_s, device_s, steps_per_epoch=5):
        self.clock, self.host_s, self.device_s = clock, host_s, device_s
        self.steps_per_epoch, self.global_batch = steps_per_epoch, 10
        self.free_at = clock.now
        self.syncs, self.steps_run = [], 0

    def compile(self):
        return None

    def start_epoch(self, epoch):
        self.epoch = epoch

    def step(self, i):
        self.clock.now += self.host_s
        self.free_at = max(self.free_at, self.clock.now) + self.device_s
        self.steps_run += 1
        return self.steps_run

    def sync(self, handle):
        self.syncs.append((self.epoch, handle))
        self.clock.now = max(self.clock.now, self.free_at)

    def loss_value(self, handle):
        return 1.0 / handle

    def evaluate(self):
        self.clock.now += 1.0   # slow evaluation: must never be inside an epoch time
        return 0.5, 0.9

    def placement(self):
        return "cpu"

    def peak_memory(self):
        return None


def train_case(**kw):
    return Case(workload="mnist_cnn", backend="jax", mode="train",
                **{"device": "cpu", "batch_size": 256, "epochs": 3, **kw})


def test_sync_mode_defaults_to_step_on_cpus_and_epoch_on_accelerators():
    assert sync_mode(train_case()) == "step"
    assert sync_mode(train_case(device="gpu:0")) == sync_mode(train_case(device="tpu:0")) == "epoch"
    assert sync_mode(train_case(device="gpu:0", options={"sync": "step"})) == "step"
    with pytest.raises(ValueError):
        sync_mode(train_case(options={"sync": "never"}))


def test_step_sync_times_every_step_and_sums_them_into_the_epoch():
    clock = FakeClock()
    dev = FakeDevice(clock, host_s=0.001, device_s=0.004)
    out = run_training(dev, train_case(options={"sync": "step"}), 100.0, clock=clock)
    m = out.metrics
    assert m["sync"] == "step" and len(dev.syncs) == 15             # one sync per step
    assert m["step_s"] == pytest.approx(0.005)                      # launch + device, no overlap
    assert m["epoch_s"] == pytest.approx(5 * 0.005) and m["first_epoch_s"] == pytest.approx(0.025)
    assert len(out.samples["step_s"]) == 10 and m["epochs_run"] == 3 and not m["budget_hit"]
    assert m["samples_per_s"] == pytest.approx(10 / 0.005)
    assert m["epoch_samples_per_s"] == pytest.approx(50 / 0.025)


def test_epoch_sync_pipelines_steady_epochs_with_one_sync_each():
    clock = FakeClock()
    dev = FakeDevice(clock, host_s=0.001, device_s=0.004)
    out = run_training(dev, train_case(options={"sync": "epoch"}), 100.0, clock=clock)
    m = out.metrics
    # the first epoch is synchronised step by step; each later epoch once, on its last step's handle
    assert [e for e, _ in dev.syncs] == [0] * 5 + [1, 2]
    assert dev.syncs[5:] == [(1, 10), (2, 15)]
    assert m["sync"] == "epoch" and m["first_epoch_s"] == pytest.approx(0.025)
    assert m["first_step_s"] == pytest.approx(0.005)
    # back to back: the host's launches hide behind the device (one launch + 5 device steps)
    assert m["epoch_s"] == pytest.approx(0.001 + 5 * 0.004)
    assert out.samples["step_s"] == pytest.approx([0.021 / 5, 0.021 / 5])   # one sample per epoch
    assert m["step_s"] == pytest.approx(0.0042)
    assert len(out.samples["first_epoch_step_s"]) == 5


def test_budget_cuts_a_long_epoch_after_a_few_steady_steps_and_does_not_count_it():
    clock = FakeClock()
    dev = FakeDevice(clock, host_s=0.0, device_s=1.0, steps_per_epoch=10)
    # epoch 1: 10 s (+1 s evaluation); the budget runs out 3 steps into epoch 2
    out = run_training(dev, train_case(epochs=5, time_budget_s=12.5, options={"sync": "step"}), 1.0,
                       clock=clock)
    m = out.metrics
    assert dev.steps_run == 13 and m["budget_hit"] and m["budget_cut_steps"] == 3
    assert m["epochs_run"] == 1 and m["epoch_s"] is None and m["epoch_samples_per_s"] is None
    assert out.samples["epoch_s"] == [pytest.approx(10.0)]          # the cut epoch is not an epoch
    assert out.samples["step_s"] == pytest.approx([1.0, 1.0, 1.0])  # but its steps are step samples
    assert "after 3 steps" in m["warning"] and len(out.series["val_loss"]) == 2


def test_budget_can_cut_the_first_epoch_once_steps_besides_the_first_are_measured():
    clock = FakeClock()
    dev = FakeDevice(clock, host_s=0.0, device_s=1.0, steps_per_epoch=100)
    out = run_training(dev, train_case(time_budget_s=0.5, options={"sync": "epoch"}), 1.0, clock=clock)
    m = out.metrics
    assert dev.steps_run == 4 and m["budget_cut_steps"] == 4     # the first step + 3
    assert m["epochs_run"] == 0 and m["first_epoch_s"] is None
    assert m["first_step_s"] == pytest.approx(1.0) and out.samples["step_s"] == pytest.approx([1.0] * 3)


def test_pipelined_epoch_cut_by_the_budget_is_one_step_sample():
    clock = FakeClock()
    dev = FakeDevice(clock, host_s=1.0, device_s=1.0, steps_per_epoch=20)
    out = run_training(dev, train_case(time_budget_s=44.5, options={"sync": "epoch"}), 1.0, clock=clock)
    m = out.metrics
    # epoch 1: 20 synchronised steps of 2 s, + 1 s evaluation; epoch 2 pipelined: the host passes the
    # budget after its 4th launch
    assert m["budget_cut_steps"] == 4 and m["epochs_run"] == 1
    assert out.samples["step_s"] == pytest.approx([5.0 / 4])   # 4 launches + the last step's device time


def test_without_in_step_budget_processes_decide_at_epoch_ends_together():
    clock = FakeClock()
    dev = FakeDevice(clock, host_s=0.0, device_s=1.0, steps_per_epoch=10)
    asked = []
    dev.in_step_budget = False
    dev.agree_stop = lambda stop: asked.append(stop) or stop
    out = run_training(dev, train_case(epochs=5, time_budget_s=12.5, options={"sync": "step"}), 1.0,
                       clock=clock)
    assert dev.steps_run == 20 and asked == [True] and out.metrics["epochs_run"] == 2
    assert out.metrics["budget_hit"] and out.metrics["budget_cut_steps"] is None


# ---- two levels (processes, samples within them) ------------------------------------------------------

def _processes(medians, spread=0.02, n=9, seed=0):
    rng = np.random.default_rng(seed)
    return [m * (1 + rng.normal(0, spread, n)) for m in medians]


def test_two_level_interval_covers_the_processes_not_only_the_samples():
    from xpubench.results.stats import two_level

    agree = two_level(_processes([1.0, 1.01, 0.99, 1.0, 1.02]))
    disagree = two_level(_processes([1.0, 1.01, 0.99, 1.0, 1.8]))
    assert agree.disagreement is None and agree.ci95_low < 1.0 < agree.ci95_high
    assert disagree.median == pytest.approx(1.0, abs=0.02)          # one slow process barely moves the figure
    assert disagree.ci95_high > 1.5 > agree.ci95_high                # ... but the interval knows it can happen
    assert disagree.disagreement == "bimodal" and "1 of 5 processes ran 1.8" in disagree.note
    assert disagree.between_spread > 0.7 and disagree.within_spread < 0.05


def test_one_process_is_the_ordinary_bootstrap_and_drift_is_not_bimodal():
    from xpubench.results.stats import hierarchical_bootstrap, two_level

    [one] = _processes([1.0])
    boot = hierarchical_bootstrap([one], resamples=4000)
    ordinary = np.median(one[np.random.default_rng(5).integers(0, one.size, (4000, one.size))], axis=1)
    assert abs(np.percentile(boot, 2.5) - np.percentile(ordinary, 2.5)) < 0.01
    single = two_level(list(one))  # a flat list of numbers is one process
    assert single.processes == 1 and single.between_spread is None and single.disagreement is None
    drift = two_level(_processes([1.0, 1.05, 1.10, 1.15, 1.20], spread=0.005))
    assert drift.disagreement == "machine state changed" and "span 19%" in drift.note and "0.5% inside" in drift.note


def test_separated_needs_every_process_beyond_every_other():
    from xpubench.results.stats import separated

    assert separated(_processes([1.0, 1.01, 0.99]), _processes([1.2, 1.25, 1.22], seed=1))
    assert not separated(_processes([1.0, 1.01, 0.99]), _processes([1.2, 1.0, 1.22], seed=1))
    assert not separated([], _processes([1.0]))
