"""Training measured epoch by epoch, whoever runs the steps: the harness (a step Trainer) or the
framework's own loop (Keras ``model.fit``). The clock, the synchronisation policy, the time budget and
the records stay with the harness; a framework loop only says where each step begins and ends.

The timed regions and rules are those of ``harness/training.py`` (its docstring): ``run_training_epochs``
gives the same Outcome as ``training.run_training`` for a step Trainer (tests/test_epochs.py checks it on
a fake device and clock), and also drives an *epoch Trainer*: a Trainer that provides

    run_epoch(epoch: int, steps: int, timer: StepTimer) -> float    # the epoch's mean training loss

instead of ``step`` / ``loss_value``. ``run_epoch`` runs at most ``steps`` steps in its own loop and calls
``timer.epoch_begin()`` first, then per step ``timer.step_begin()`` and ``timer.step_end(handle)``
(stopping after the step for which ``step_end`` returns True: the budget is spent), and
``timer.epoch_end()`` after the last step. The timer reads the clock and calls ``trainer.sync`` exactly
where the harness's own loop does; in a pipelined epoch (``sync == "epoch"`` after the first epoch)
``step_begin`` / ``step_end`` read no synchronised times, and ``step_end`` may be called late (Keras: at
the next step's begin, see backends/keras_/train.py) since only host time is read there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

from xpubench.harness.outcome import Outcome
from xpubench.harness.training import MIN_CUT_STEPS, EpochRecord, _gallery, _metrics, _steady_steps, sync_mode


class StepTimer:
    """The harness's clock over one epoch of ``steps`` planned steps (see the module docstring)."""

    def __init__(self, sync: Callable[[Any], None], clock: Callable[[], float], *, steps: int, epoch: int,
                 pipelined: bool, budget: float | None, begin: float, check_in_steps: bool):
        self.sync, self.clock, self.steps, self.epoch = sync, clock, steps, epoch
        self.pipelined, self.budget, self.begin, self.check_in_steps = pipelined, budget, begin, check_in_steps
        self.done, self.times, self.last = 0, [], None
        self.start = self.t0 = 0.0
        self.record: EpochRecord | None = None

    def epoch_begin(self) -> None:
        self.start = self.clock()

    def step_begin(self) -> None:
        if not self.pipelined:
            self.t0 = self.clock()

    def step_end(self, handle: Any = None) -> bool:
        """The step is launched (pipelined) or, synchronised here, finished; True: end the epoch now."""
        self.done += 1
        self.last = handle
        if self.pipelined:
            now = self.clock() if self.check_in_steps else 0.0   # host time: the device may lag behind it
        else:
            self.sync(handle)
            now = self.clock()
            self.times.append(now - self.t0)
        return bool(self.check_in_steps and self.done < self.steps
                    and self.done - (self.epoch == 0) >= MIN_CUT_STEPS and now - self.begin > self.budget)

    def epoch_end(self) -> EpochRecord:
        if self.pipelined:
            self.sync(self.last)
        self.record = EpochRecord(self.done, self.clock() - self.start, self.times, complete=self.done == self.steps)
        return self.record


def step_epoch(trainer, epoch: int, steps: int, timer: StepTimer) -> float:
    """The harness's own step loop on the timer: ``trainer.step(i)`` for i < steps; the mean loss."""
    handles = []
    timer.epoch_begin()
    for i in range(steps):
        timer.step_begin()
        handles.append(trainer.step(i))
        if timer.step_end(handles[-1]):
            break
    timer.epoch_end()
    return sum(trainer.loss_value(h) for h in handles) / len(handles)


def run_training_epochs(trainer, case, flops_per_sample: float, clock=time.perf_counter) -> Outcome:
    """``training.run_training`` for step and epoch Trainers alike (see the module docstring)."""
    epochs = case.epochs or 1
    steps = min(case.steps or trainer.steps_per_epoch, trainer.steps_per_epoch)
    if steps < 1:
        raise ValueError(f"the training set holds less than one global batch ({trainer.global_batch})")
    mode = sync_mode(case)
    budget = case.time_budget_s
    check_in_steps = bool(budget) and getattr(trainer, "in_step_budget", True)
    agree = getattr(trainer, "agree_stop", None) or (lambda stop: stop)
    run_epoch = getattr(trainer, "run_epoch", None) or partial(step_epoch, trainer)
    compile_s = trainer.compile()
    records: list[EpochRecord] = []
    eval_times, train_loss, val_loss, val_metric = [], [], [], []
    budget_hit = False
    begin = clock()
    for epoch in range(epochs):
        trainer.start_epoch(epoch)
        timer = StepTimer(trainer.sync, clock, steps=steps, epoch=epoch, pipelined=mode == "epoch" and epoch > 0,
                          budget=budget, begin=begin, check_in_steps=check_in_steps)
        loss = run_epoch(epoch, steps, timer)
        if timer.record is None or timer.record.steps_run < 1:
            raise RuntimeError(f"epoch {epoch + 1}: the trainer's loop ran no measured step")
        records.append(timer.record)
        train_loss.append(float(loss))
        t0 = clock()
        vl, vm = trainer.evaluate()
        eval_times.append(clock() - t0)
        val_loss.append(vl)
        val_metric.append(vm)
        if not records[-1].complete:
            budget_hit = True
            break
        if budget and 1 <= epoch < epochs - 1 and agree(clock() - begin > budget):
            budget_hit = True
            break
    epoch_times = [r.time_s for r in records if r.complete]
    return Outcome(
        metrics=_metrics(case, trainer, mode, steps, compile_s, records, eval_times, train_loss, val_loss,
                         val_metric, flops_per_sample, budget_hit),
        samples={"step_s": _steady_steps(records), "epoch_s": epoch_times,
                 "first_epoch_step_s": records[0].step_times, "eval_s": eval_times},
        series={"train_loss": train_loss, "val_loss": val_loss, "val_metric": val_metric},
        placement=trainer.placement(),
        artifacts=_gallery(trainer, case),
    )
