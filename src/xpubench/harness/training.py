"""The training measurement, the same for every framework.

Timed regions (see docs/methodology.md):
- ``compile_s``: ahead-of-time compilation of the train step (jax.jit lower+compile; with torch.compile,
  one warm-up call of the compiled step whose update is then undone).
- ``step``: one optimizer step on a batch already on the device, from the call until the device has
  finished it (the trainer's sync). The loss value is read after the clock stops.
- ``epoch``: all steps of one epoch, nothing else: no evaluation, no data loading (the data set sits
  on the device before the clock starts).
- ``eval``: the validation pass after each epoch, timed apart and never part of epoch time.
The first epoch (compile, allocator and cache warm-up) is always timed step by step and reported apart;
steady figures come from the later epochs, in one of two synchronisation modes (``case.options["sync"]``,
``--sync``):
- ``step`` (the default on CPUs): every step is synchronised and timed; the epoch is the sum of its
  synchronised steps. Gives the per-step distribution (median, p90), but the host cannot queue step
  k+1 while the device runs step k. On a CPU, a trainer that dispatches ahead (``dispatches_ahead``:
  JAX) runs its steady epochs one step ahead instead: step k+1 is queued before the host waits for step
  k alone, and step k's sample runs from step k-1's end (the epoch's start for its first step) to its
  own, so the device never waits for the host's clock reads and launches between steps.
- ``epoch`` (the default on accelerators): steady epochs run their steps back to back with one sync at
  the end, as a training loop does (the host dispatches ahead; launch overhead hides behind device
  work). A step sample is then one epoch's time / its step count.
The time budget (``case.time_budget_s``) is checked after every step as well as at epoch ends: once
the budget is spent and at least ``MIN_CUT_STEPS`` steps (besides the very first) are measured, the
epoch is cut short. Its steps are step samples, but it is not an epoch (no epoch time, not in
``epochs_run``); ``budget_cut_steps`` says how many of its steps ran.

Whoever runs the steps, the clock, the synchronisation rules, the budget and the records stay here, in
a ``StepTimer`` per epoch. A *step Trainer* lets the harness run its steps (``step(i)``, ``loss_value``);
an *epoch Trainer* (Keras ``model.fit``: the framework owns the loop) provides instead

    run_epoch(epoch: int, steps: int, timer: StepTimer) -> float    # the epoch's mean training loss

which runs at most ``steps`` steps in its own loop and calls ``timer.epoch_begin()`` first, then per step
``timer.step_begin()`` and ``timer.step_end(handle)`` (stopping after the step for which ``step_end``
returns True: the budget is spent), and ``timer.epoch_end()`` after the last step. The timer reads the
clock and calls ``trainer.sync`` exactly where the harness's own loop (``step_epoch``) does; in a
pipelined epoch ``step_begin`` / ``step_end`` read no synchronised times, and ``step_end`` may be called
late (Keras: at the next step's begin, backends/keras_/train.py) since only host time is read there.
An epoch run one step ahead waits in ``step_end(handle)`` for the step before ``handle``'s: only a trainer
that passes every step's handle may declare ``dispatches_ahead``.

The epochs' records (``EpochRecord``) and the figures made of them after the loop (the metrics, the steady
step samples, the gallery) are harness/training_metrics.py's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from xpubench.case import SYNC_MODES
from xpubench.devices.device import is_accelerator
from xpubench.energy.windows import EnergyWindows, meter_for_case
from xpubench.harness.target import TargetRun, wants_target
from xpubench.harness.training_metrics import EpochRecord, gallery, steady_step_samples, training_metrics
from xpubench.results.outcome import Outcome

MIN_CUT_STEPS = 3   # steps measured (besides the very first) before the budget may cut an epoch


class Trainer(Protocol):
    steps_per_epoch: int
    global_batch: int

    def compile(self) -> float | None: ...            # seconds of AOT compile, or None
    def start_epoch(self, epoch: int) -> None: ...     # e.g. a new batch order; not timed
    def step(self, i: int) -> Any: ...                 # one optimizer step on batch i
    def sync(self, handle: Any) -> None: ...           # wait until the step's (and earlier steps') work is done
    def loss_value(self, handle: Any) -> float: ...
    def evaluate(self) -> tuple[float, float]: ...     # (validation loss, validation metric)
    def placement(self) -> str: ...
    def peak_memory(self) -> int | None: ...            # highest memory in use since reset_peak_memory()
    def predict_eval(self) -> tuple[Any, Any, Any]: ...  # (x_eval, y_eval, class probabilities), numpy
    # optional:
    #   run_epoch(epoch, steps, timer) -> float   an epoch Trainer's own loop, instead of step / loss_value
    #   matmul_precision: str        what the matmuls ran as ("highest", "tensorfloat32", "default"), recorded
    #   dispatches_ahead: bool       step(i) returns once the step is queued, and sync(handle) waits for that
    #                                step alone (not for steps queued after it): step mode on a CPU then runs
    #                                one step ahead (module docstring)
    #   in_step_budget: bool         False where processes keep their own clocks (multi-process): the
    #                                budget is then checked at epoch ends only, where they agree
    #   agree_stop(stop) -> bool     one decision for all processes (untimed, at epoch ends)
    #   reset_peak_memory()          start the peak-memory figure: called after compile, before step 1


def sync_mode(case) -> str:
    """``case.options["sync"]``, or the default: ``step`` on a CPU, ``epoch`` on an accelerator."""
    mode = case.options.get("sync")
    if mode is None:
        return "epoch" if is_accelerator(case.device) else "step"
    if mode not in SYNC_MODES:
        raise ValueError(f"sync mode must be one of {', '.join(SYNC_MODES)}, got {mode!r}")
    return mode


class StepTimer:
    """The harness's clock over one epoch of ``steps`` planned steps (see the module docstring). ``ahead``:
    a synchronised epoch run one step ahead (the sync of step k waits until step k+1 is queued)."""

    def __init__(self, sync: Callable[[Any], None], clock: Callable[[], float], *, steps: int, epoch: int,
                 pipelined: bool, budget: float | None, begin: float, check_in_steps: bool, ahead: bool = False):
        self.sync, self.clock, self.steps, self.epoch = sync, clock, steps, epoch
        self.pipelined, self.budget, self.begin, self.check_in_steps = pipelined, budget, begin, check_in_steps
        self.ahead = ahead and not pipelined
        self.done, self.times, self.last = 0, [], None
        self.start = self.t0 = 0.0
        self.record: EpochRecord | None = None

    def epoch_begin(self) -> None:
        self.start = self.t0 = self.clock()

    def step_begin(self) -> None:
        if not (self.pipelined or self.ahead):
            self.t0 = self.clock()

    def step_end(self, handle: Any = None) -> bool:
        """The step is launched (pipelined; the first step run ahead) or, synchronised here, finished (run
        ahead: the step before it); True: end the epoch now."""
        self.done += 1
        previous, self.last = self.last, handle
        if self.pipelined or (self.ahead and self.done == 1):
            now = self.clock() if self.check_in_steps else 0.0   # host time: the device may lag behind it
        else:
            now = self._finished(previous if self.ahead else handle)
        return bool(self.check_in_steps and self.done < self.steps
                    and self.done - (self.epoch == 0) >= MIN_CUT_STEPS and now - self.begin > self.budget)

    def _finished(self, handle: Any) -> float:
        """Wait for the step of ``handle``; its sample runs from t0 (its call, or run ahead: the end of the
        step before it) to now."""
        self.sync(handle)
        now = self.clock()
        self.times.append(now - self.t0)
        self.t0 = now
        return now

    def epoch_end(self) -> EpochRecord:
        if self.pipelined:
            self.sync(self.last)
        elif self.ahead and self.done:
            self._finished(self.last)
        self.record = EpochRecord(self.done, self.clock() - self.start, self.times, complete=self.done == self.steps)
        return self.record


def step_epoch(trainer, epoch: int, steps: int, timer: StepTimer, first: int = 0) -> float:
    """The harness's own step loop on the timer: ``trainer.step(i)`` for first <= i < first + steps (a
    round of an epoch under --eval-every starts past 0); the mean loss."""
    handles = []
    timer.epoch_begin()
    for i in range(first, first + steps):
        timer.step_begin()
        handles.append(trainer.step(i))
        if timer.step_end(handles[-1]):
            break
    timer.epoch_end()
    return sum(trainer.loss_value(h) for h in handles) / len(handles)


def run_training(trainer: Trainer, case, flops_per_sample: float, clock=time.perf_counter,
                 gpu_identity=None) -> Outcome:
    """Measure a case's training (the timed regions and rules: the module docstring), for a step Trainer
    (the harness runs its steps) and an epoch Trainer (``run_epoch``: the framework runs them) alike."""
    epochs = case.epochs or 1
    steps = min(case.steps or trainer.steps_per_epoch, trainer.steps_per_epoch)
    mode = sync_mode(case)
    ahead = mode == "step" and getattr(trainer, "dispatches_ahead", False) and not is_accelerator(case.device)
    budget = case.time_budget_s
    check_in_steps = bool(budget) and getattr(trainer, "in_step_budget", True)
    agree = getattr(trainer, "agree_stop", None) or (lambda stop: stop)
    run_epoch = getattr(trainer, "run_epoch", None) or partial(step_epoch, trainer)
    # a quality target (--target): its rounds, evaluations and stop rule (harness/target.py); else one
    # round per epoch, every epoch run
    target = TargetRun(case, trainer, steps) if wants_target(case) else None
    rounds = target.rounds(epochs) if target else [(epoch, 0, steps) for epoch in range(epochs)]
    compile_s = trainer.compile()
    reset = getattr(trainer, "reset_peak_memory", None)
    if reset:
        reset()   # peak memory: from here (data, model and optimizer state resident) to the end
    records: list[EpochRecord] = []
    eval_times, train_loss, val_loss, val_metric = [], [], [], []
    budget_hit = False
    energy = EnergyWindows(meter_for_case(case, gpu_identity))   # read around the steady epochs (energy/windows.py)
    begin = clock()
    for r, (epoch, first, count) in enumerate(rounds):   # r: the round (= the epoch, without --eval-every)
        if first == 0:
            trainer.start_epoch(epoch)
        timer = StepTimer(trainer.sync, clock, steps=count, epoch=r, pipelined=mode == "epoch" and r > 0,
                          budget=budget, begin=begin, check_in_steps=check_in_steps, ahead=ahead and r > 0)
        with energy.window(keep=r > 0 or len(rounds) == 1):
            loss = run_epoch(epoch, count, timer) if first == 0 else step_epoch(trainer, epoch, count, timer, first)
        if timer.record is None or timer.record.steps_run < 1:
            raise RuntimeError(f"epoch {epoch + 1}: the trainer's loop ran no measured step")
        records.append(timer.record)
        train_loss.append(float(loss))
        t0 = clock()
        vl, vm = trainer.evaluate()
        end = clock()
        eval_times.append(end - t0)
        val_loss.append(vl)
        val_metric.append(vm)
        if target and agree(target.after_eval(timer.record.steps_run, vl, vm, end - t0, end - begin)):
            break   # the target is reached: the clock stops at the end of this evaluation
        if not records[-1].complete:
            budget_hit = True
            break
        if budget and 1 <= r < len(rounds) - 1 and agree(clock() - begin > budget):
            budget_hit = True
            break
    epoch_times = [r.time_s for r in records if r.complete]
    outcome = Outcome(
        metrics=training_metrics(case, trainer, mode, steps, compile_s, records, eval_times, train_loss, val_loss,
                                 val_metric, flops_per_sample, budget_hit, ahead=ahead and len(records) > 1,
                                 energy=energy),
        samples={"step_s": steady_step_samples(records), "epoch_s": epoch_times,
                 "first_epoch_step_s": records[0].step_times, "eval_s": eval_times},
        series={"train_loss": train_loss, "val_loss": val_loss, "val_metric": val_metric},
        placement=trainer.placement(),
        artifacts=gallery(trainer, case),
    )
    if target:
        target.finish(outcome)   # time to target, the curve, "not reached" (harness/target.py)
    return outcome
