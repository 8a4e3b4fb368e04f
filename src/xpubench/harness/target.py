"""Training to a quality target: the stop rule and the curve that harness/training.py's loop runs when a
case has one (``case.options["target"]``: ``--target METRIC=VALUE``, or ``default`` from ``--mode
time-to-target``).

The clock is training's own (harness/training.py): it starts right before the first step of epoch 1,
after the set-up (data on the device, model and optimizer built: ``init_s``, timed by the caller) and the
compilation (``compile_s``); both stay off it, as MLPerf keeps initialisation off its clock. Every
evaluation on the held-out split is on the clock (MLPerf's rule); the clock stops at the end of the first
evaluation whose value reaches the target. Evaluation follows every epoch, or every ``--eval-every N``
steps (the epoch is then run in rounds of N steps, in the same batch order; step Trainers only: Keras
``fit`` runs whole epochs, and its backend record skips such a case). Training stops at the target or
after the case's epochs (the cap), whichever comes first; a run that ends without the target says so
(``target_reached`` false, ``message``, the best value seen), never a silent success.

Seeds: process i of a case trains with seed ``case.seed + i`` (``process_case``, called by the runner), so
the K processes are K seeds; each records its own (``metrics.seed``). The arithmetic from evaluations to
figures is results/target_stats.py.
"""

from __future__ import annotations

import dataclasses
import math

from xpubench.case import SERVE
from xpubench.errors import UserError
from xpubench.harness.setup import learning_rate
from xpubench.results.outcome import Outcome
from xpubench.results.target_stats import EvalPoint, run_figures
from xpubench.results.targets import DEFAULT, Target, check_metric, parse
from xpubench.workloads import get_workload


def wants_target(case) -> bool:
    """Whether the case trains to a quality target."""
    return case.mode == "train" and bool(case.options.get("target"))


def process_case(case, process: int):
    """The case worker process ``process`` runs: for a case with a target, or a serving point (each round its
    own prompts and arrivals: no prompt of an earlier round is in the server's cache), the same case with
    seed ``case.seed + process`` (each process its own seed); any other case unchanged."""
    own = wants_target(case) or case.mode == SERVE
    return dataclasses.replace(case, seed=case.seed + process) if own and process else case


def resolve(case, spec, train_samples: int, global_batch: int) -> tuple[Target, str]:
    """The case's Target and where it came from. ``default`` is the workload's default for the data found:
    its whole-dataset target when the training set holds the whole training split (every whole batch of
    ``spec.train_samples``), else its target for part of the data (its record's ``target``)."""
    asked = case.options["target"]
    if asked != DEFAULT:
        target, source = parse(asked), "--target"
    else:
        full = train_samples > spec.train_samples - global_batch
        data = "the whole training split" if full else f"part of the data ({train_samples:,} training samples)"
        default = get_workload(case.workload).target
        target = default.for_data(full) if default else None
        if target is None:
            raise UserError(f"{case.workload} has no default target on {data}: give --target METRIC=VALUE "
                            "(docs/methodology.md lists meaningful ones)")
        source = f"default for {case.workload} on {data}"
    check_metric(target, case.workload, spec.metric)
    return target, source


class TargetRun:
    """One process's run to the target: the rounds to train, one evaluation point per round, the stop."""

    def __init__(self, case, trainer, steps: int):
        self.case, self.steps, self.global_batch, self.spec = case, steps, trainer.global_batch, trainer.spec
        self.target, self.source = resolve(case, trainer.spec, steps * trainer.global_batch, trainer.global_batch)
        every = case.options.get("eval_every")
        self.every = every if every and every < steps else None
        if self.every and hasattr(trainer, "run_epoch"):   # a backend's gate says so first (keras_: unsupported)
            raise RuntimeError(f"{case.backend} runs whole epochs in its own loop: it cannot evaluate every "
                               f"{every} steps (drop --eval-every)")
        self.points: list[EvalPoint] = []
        self.steps_done = 0

    def rounds(self, epochs: int) -> list[tuple[int, int, int]]:
        """(epoch, first step, steps) of each stretch of training followed by an evaluation."""
        if not self.every:
            return [(epoch, 0, self.steps) for epoch in range(epochs)]
        return [(epoch, first, min(self.every, self.steps - first))
                for epoch in range(epochs) for first in range(0, self.steps, self.every)]

    def after_eval(self, steps_run: int, val_loss: float, val_metric: float, eval_s: float, wall_s: float) -> bool:
        """Record an evaluation (``wall_s``: the clock at its end); True when it reached the target."""
        self.steps_done += steps_run
        value = self.target.pick(val_loss, val_metric)
        value = None if value is None or math.isnan(value) else float(value)
        self.points.append(EvalPoint(self.steps_done, wall_s, eval_s, value))
        return self.target.reached(value)

    def finish(self, outcome: Outcome) -> None:
        """Add the run's target figures, its curve and, when it fell short, the message saying so."""
        figures = run_figures(self.points, self.target, steps_per_epoch=self.steps, global_batch=self.global_batch)
        lr, scaling = learning_rate(self.spec, self.case.options, self.case.devices)
        outcome.metrics.update(figures, target=str(self.target), target_source=self.source,
                               max_epochs=self.case.epochs, eval_every_steps=self.every, seed=self.case.seed,
                               learning_rate=lr, lr_scaling=scaling)
        outcome.series.update(target_wall_s=[p.wall_s for p in self.points],
                              target_value=[p.value for p in self.points],
                              target_epoch=[p.steps / self.steps for p in self.points])
        if self.every:   # the loop's rounds are not epochs: no per-epoch time (eval_every_steps says why)
            outcome.metrics.update(first_epoch_s=None, epoch_s=None, epoch_samples_per_s=None,
                                   epochs_run=self.steps_done // self.steps)
        if not figures["target_reached"]:
            best, at = figures["target_best"], figures["target_best_epoch"]
            seen = "no valid value" if best is None else f"best {best:.4g} at epoch {at:.3g}"
            outcome.message = (f"target {self.target} not reached in {self.steps_done / self.steps:.3g} epochs "
                               f"({seen})")


def time_init(outcome: Outcome, case, init_s: float) -> None:
    """Record the set-up time before the clock (a target case only: its clock excludes it)."""
    if wants_target(case):
        outcome.metrics["init_s"] = init_s
