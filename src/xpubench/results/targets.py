"""Quality targets of training cases (``--target METRIC=VALUE``, ``--mode time-to-target``): what a target
is, and how it is written and read (results record it as ``accuracy>=0.975``). A workload's default
target is its record's ``target`` (workloads/base.py DefaultTarget).

A target names a figure the training loop measures on held-out data after every evaluation and the
value it must reach: ``accuracy`` (higher is better; a fraction, 0.975 = 97.5%), ``mse`` (lower is
better; regression workloads) or ``val_loss`` (the validation loss, lower is better; any workload). How
the loop stops on it: harness/target.py; how the runs to it combine: results/target_stats.py;
docs/methodology.md ("Time to target").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xpubench.errors import UserError

HIGHER_IS_BETTER = ("accuracy",)
LOWER_IS_BETTER = ("mse", "val_loss")
METRICS = HIGHER_IS_BETTER + LOWER_IS_BETTER
DEFAULT = "default"   # the case option of --mode time-to-target without --target: resolved in the worker


def _missing(value: float | None) -> bool:
    return value is None or math.isnan(value)


@dataclass(frozen=True)
class Target:
    metric: str      # "accuracy" | "mse" | "val_loss"
    value: float

    @property
    def higher_is_better(self) -> bool:
        return self.metric in HIGHER_IS_BETTER

    def reached(self, value: float | None) -> bool:
        """Whether an evaluation's value meets the target (a missing or NaN value never does)."""
        if _missing(value):
            return False
        return value >= self.value if self.higher_is_better else value <= self.value

    def better(self, a: float | None, b: float | None) -> bool:
        """Whether ``a`` is a better value than ``b`` (None: no value yet; NaN is never better)."""
        if _missing(a):
            return False
        if _missing(b):
            return True
        return a > b if self.higher_is_better else a < b

    def pick(self, val_loss: float, val_metric: float) -> float:
        """The evaluation's value this target reads: the validation loss, or the workload's metric."""
        return val_loss if self.metric == "val_loss" else val_metric

    def __str__(self) -> str:
        return f"{self.metric}{'>=' if self.higher_is_better else '<='}{self.value:g}"


def parse(text: str) -> Target:
    """``METRIC=VALUE`` (``accuracy=0.975``, ``val_loss=1.6``) or a target's own spelling
    (``accuracy>=0.975``, as results record it) -> Target; UserError (one line) when it is not one."""
    if not isinstance(text, str) or not text.strip():
        raise UserError(f"--target must be METRIC=VALUE (e.g. accuracy=0.975), got {text!r}")
    spelled = text.replace(">=", "=").replace("<=", "=").replace(" ", "")
    name, sep, number = spelled.partition("=")
    name = "val_loss" if name == "loss" else name
    if not sep or name not in METRICS:
        raise UserError(f"--target must be METRIC=VALUE with METRIC one of {', '.join(METRICS)} "
                        f"(e.g. accuracy=0.975), got {text!r}")
    try:
        value = float(number)
    except ValueError:
        raise UserError(f"--target {text}: {number!r} is not a number") from None
    if not math.isfinite(value):
        raise UserError(f"--target {text}: the value must be a finite number")
    if name == "accuracy" and not 0 < value <= 1:
        raise UserError(f"--target {text}: accuracy is a fraction in (0, 1] (97.5% is accuracy=0.975)")
    if name in LOWER_IS_BETTER and value < 0:
        raise UserError(f"--target {text}: {name} is never below 0")
    return Target(name, value)


def check_metric(target: Target, workload: str, spec_metric: str) -> None:
    """UserError when the workload's evaluation does not measure the target's figure."""
    if target.metric not in ("val_loss", spec_metric):
        raise UserError(f"--target {target.metric}: {workload}'s validation metric is {spec_metric}; "
                        f"targets for it: {spec_metric}=VALUE or val_loss=VALUE")
