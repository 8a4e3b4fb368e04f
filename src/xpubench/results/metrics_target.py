"""The figures of a training case with a quality target (``--target``, ``--mode time-to-target``).

Per worker process (one seed: harness/target.py) and, folded over the case's processes, per case
(results/target_stats.py): where a figure means something else at the two levels, its meaning says both.
What the clock holds: docs/methodology.md, "Time to target".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xpubench.results.metric_base import Metrics, figure


@dataclass
class TimeToTarget(Metrics):
    """Training until a target is reached on held-out data (harness/target.py, results/target_stats.py)."""

    GROUP: ClassVar[str] = "target"
    target: str | None = figure("text", "the quality target, e.g. accuracy>=0.975", optional=True)
    target_source: str | None = figure("text", "where the target came from (--target, or the workload's default "
                                               "for the data found)", optional=True)
    target_reached: bool | None = figure("flag", "process: its run reached the target; case: the case has a "
                                                 "time to target (at most one seed did not reach it)", optional=True)
    time_to_target_s: float | None = figure("s", "process: wall time from the first training step to the end of "
                                                 "the evaluation that reached the target, evaluations included "
                                                 "(initialisation and compilation not); case: MLPerf's mean of the "
                                                 "seeds' times with the fastest and slowest dropped", optional=True)
    time_to_target_no_eval_s: float | None = figure("s", "time_to_target_s less the evaluation passes (process; "
                                                         "case: the same trimmed mean)", optional=True)
    time_to_target_median_s: float | None = figure("s", "case: median of the seeds' times to target",
                                                   optional=True)
    time_to_target_min_s: float | None = figure("s", "case: the fastest seed", optional=True)
    time_to_target_max_s: float | None = figure("s", "case: the slowest seed that reached the target",
                                                optional=True)
    time_to_target_ci95_low_s: float | None = figure("s", "case: 95% bootstrap interval of the trimmed mean, low "
                                                          "end", optional=True)
    time_to_target_ci95_high_s: float | None = figure("s", "case: its high end (None: unbounded, resamples with "
                                                           "two seeds short of the target)", optional=True)
    epochs_to_target: float | None = figure("count", "epochs trained when the target was reached (fractions "
                                                     "with --eval-every; case: median over the seeds that "
                                                     "reached it)", optional=True)
    steps_to_target: int | None = figure("count", "optimizer steps when the target was reached (case: median)",
                                         optional=True)
    samples_to_target: int | None = figure("count", "training samples seen when the target was reached "
                                                    "(case: median)", optional=True)
    target_best: float | None = figure("count", "the best value of the target's metric seen (case: over every "
                                                "seed)", optional=True)
    target_best_epoch: float | None = figure("count", "process: the epoch of that best value", optional=True)
    target_evaluations: int | None = figure("count", "evaluations run until the stop", optional=True)
    max_epochs: int | None = figure("count", "the epoch cap: training stops there, reached or not",
                                    optional=True)
    eval_every_steps: int | None = figure("count", "evaluation every this many steps (None: every epoch)",
                                          optional=True)
    seed: int | None = figure("count", "process: the seed it trained with (the case's seed + its index)",
                              optional=True)
    seeds: int | None = figure("count", "case: seeds (worker processes) whose run ended ok", optional=True)
    seeds_reached: int | None = figure("count", "case: seeds that reached the target", optional=True)
    init_s: float | None = figure("s", "set-up before the clock: data loaded onto the device, model and "
                                       "optimizer built (compile_s apart)", optional=True)
    learning_rate: float | None = figure("count", "the learning rate the optimizer ran with", optional=True)
    lr_scaling: str | None = figure("text", "how that learning rate was scaled (with the device count under "
                                            "--lr-scaling; never with the batch size)", optional=True)
