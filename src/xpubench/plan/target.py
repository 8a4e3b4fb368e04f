"""The plan's side of quality targets: ``--target METRIC=VALUE`` and ``--mode time-to-target`` checked
(plan.validation.validate), the training cases they make (plan._cases_for) and the seeds a run gives them.

``--target`` makes every training case of the plan train to that target; ``--mode time-to-target``
asks for training cases to the workload's default target (its record's ``target``), beside any other
mode asked for. Either way the case is a training case (mode ``train``, the training loop) whose options carry
``target`` (and ``eval_every``); the target is part of the case's key. Real data only: synthetic
labels are random, so no model can learn them to any target.
"""

from __future__ import annotations

from xpubench.errors import UserError
from xpubench.results.targets import DEFAULT, check_metric, parse
from xpubench.workloads import get_workload, names

TIME_TO_TARGET = "time-to-target"   # the --mode that trains to the workload's default target
TARGET_SEEDS = 5                    # default worker processes (= seeds) per case of a run with a target
#                                     (plan/request.py worker_processes)


def wanted(req) -> bool:
    """Whether the request trains to a quality target."""
    return req.target is not None or TIME_TO_TARGET in (req.modes or [])


def check(req, quick: bool) -> None:
    """What can be wrong with a request's target, before anything runs (UserError: one line, exit 2);
    ``quick``: whether its cases are brief (plan/request.py ``is_quick``)."""
    every = req.eval_every
    if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
        raise UserError(f"--eval-every must be a positive whole number of steps, got {every!r}")
    if not wanted(req):
        if every is not None:
            raise UserError("--eval-every sets how often a run to a quality target evaluates: give --target "
                            "METRIC=VALUE or --mode time-to-target too")
        return
    if req.target is not None:
        parse(req.target)
    if req.data != "real":
        raise UserError("a quality target needs real data (--data real --data-dir DIR): synthetic labels are "
                        "random, so no model can reach a target on them")
    if quick:
        raise UserError("training to a quality target runs whole epochs: name the workloads (-w ...) instead "
                        "of --quick")
    if req.target is not None and req.modes and not {"train", TIME_TO_TARGET} & set(req.modes):
        raise UserError(f"--target applies to training: add --mode train (asked: {', '.join(req.modes)})")
    if req.target is not None and "int8" in (req.precisions or []):
        raise UserError("--target applies to training, and int8 runs inference only: drop int8")


def loop_mode(asked: str) -> str:
    """The case mode of a requested mode: time-to-target runs the training loop."""
    return "train" if asked == TIME_TO_TARGET else asked


def case_fields(req, asked: str, workload, spec, epochs: int | None, options: dict) -> dict:
    """Fields of the cases of one requested mode of ``workload`` (its record; ``spec`` its spec for these
    options): ``epochs`` (for a case with a target, the cap: --epochs, else the workload's default cap,
    else its epochs) and, with a target, ``options`` plus ``target`` and ``eval_every``. ``epochs``: the
    plan's epochs for a case without a target; ``options``: its options."""
    if asked == "train" and req.target is None or asked not in ("train", TIME_TO_TARGET):
        return {"epochs": epochs or spec.epochs}
    default = workload.target
    if req.target is not None:
        target = str(parse(req.target))
        check_metric(parse(target), workload.name, spec.metric)
    elif default is not None:
        target = DEFAULT
    else:
        known = ", ".join(n for n in names() if get_workload(n).target is not None)
        raise UserError(f"{workload.name} has no default target (defaults: {known}): give --target METRIC=VALUE")
    options = {**options, "target": target, **({"eval_every": req.eval_every} if req.eval_every else {})}
    return {"epochs": req.epochs or (default.max_epochs if default else spec.epochs), "options": options}


def trains_to_target(req, asked: str) -> bool:
    """Whether the cases of one requested mode train to a quality target (one batch size unless asked:
    plan/defaults.py default_batch_sizes)."""
    return asked == TIME_TO_TARGET or (asked == "train" and req.target is not None)
