"""harness/training.py: an epoch Trainer (a loop of its own that reports its steps to the StepTimer, as
Keras fit's callback does) is measured by the same rules as a step Trainer whose steps the harness runs.
Fake device and clock: no timing of real work."""

from __future__ import annotations

import dataclasses

import pytest
from test_stats_timing import FakeClock, FakeDevice, train_case

from xpubench.harness.training import run_training

CASES = [
    {"options": {"sync": "step"}},
    {"options": {"sync": "epoch"}},
    {"epochs": 5, "time_budget_s": 12.5, "options": {"sync": "step"}},       # cut in epoch 2
    {"time_budget_s": 0.5, "options": {"sync": "epoch"}},                 # cut in the first epoch
    {"time_budget_s": 44.5, "options": {"sync": "epoch"}},                # a pipelined epoch cut
    {"epochs": 5, "time_budget_s": 25.0, "options": {"sync": "step"}},       # stop at an epoch end
]


def _outcome(run, kw, dev_args):
    clock = FakeClock()
    dev = FakeDevice(clock, *dev_args)
    out = run(dev, train_case(**kw), 100.0, clock=clock)
    return dataclasses.asdict(out), dev.syncs, dev.steps_run


class OwnLoopTrainer(FakeDevice):
    """The same fake device driven by a loop of its own, like Keras fit: it reports step begins and ends
    to the timer and stops where the timer says; the mean loss comes from the loop, not from handles."""

    def run_epoch(self, epoch, steps, timer):
        losses = []
        timer.epoch_begin()
        for i in range(steps):
            timer.step_begin()
            handle = self.step(i)
            losses.append(self.loss_value(handle))
            if timer.step_end(handle):
                break
        timer.epoch_end()
        return sum(losses) / len(losses)


@pytest.mark.parametrize("kw", CASES)
def test_an_epoch_trainer_is_measured_like_a_step_trainer(kw):
    clock = FakeClock()
    own = OwnLoopTrainer(clock, 0.0, 1.0, 10)
    got = run_training(own, train_case(**kw), 100.0, clock=clock)
    expected = _outcome(run_training, kw, (0.0, 1.0, 10))[0]
    assert dataclasses.asdict(got) == expected


def test_an_epoch_trainer_that_runs_no_step_is_an_error():
    class Lazy(FakeDevice):
        def run_epoch(self, epoch, steps, timer):
            return 0.0

    clock = FakeClock()
    with pytest.raises(RuntimeError, match="no measured step"):
        run_training(Lazy(clock, 0.0, 1.0), train_case(), 1.0, clock=clock)
