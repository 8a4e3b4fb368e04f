"""A case turned back into the command that plans it again. For `xpubench run`, the arguments are read
through OPTIONS (plan/options.py): every flag whose value the case holds. A serve case gets
`xpubench serve`'s arguments instead (serve/rerun.py). The static site prints these commands under each
run. tests/test_rerun.py parses each case's command with the CLI's parser, plans it, and checks that the
case's key is among the planned keys.

What a case does not hold, the command does not say. That covers the run settings (--processes,
--timeout: a run's, not a case's) and the prices (the case's ``price_per_hour`` prices its results; it
does not change how it runs). ``local_paths=False`` leaves out the folders of this machine (--data-dir,
--save-weights): a public page names no local path, so the rerun reads the default data folder. A
workload option with no flag is given by ``--quick`` when the brief run sets it (llama's ``n_layers = 4``).
Any other is returned apart, as the ``[run.options]`` keys a --config file must add.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Mapping
from typing import Any

from xpubench.case import Case
from xpubench.plan import PlanRequest
from xpubench.plan.options import OPTIONS, Option
from xpubench.plan.target import TIME_TO_TARGET
from xpubench.results.targets import DEFAULT as DEFAULT_TARGET
from xpubench.workloads import REGISTRY, get_workload, option_rows

# where a PlanRequest field's value is in a case: a field of the case, or a key of its options (dotted: a key of
# a key); the fields of a list are the case's one value ("workloads" -> its workload)
IN_CASE = {"workloads": "workload", "backends": "backend", "devices": "device", "precisions": "precision",
           "batch_sizes": "batch_size", "sizes": "size", "device_counts": "devices",
           **{f: f for f in ("epochs", "steps", "train_samples", "eval_samples", "time_budget_s", "data", "data_dir",
                             "compile", "seed")},
           "target": "options.target", "eval_every": "options.eval_every", "model": "options.model",
           **{f: f"options.model_input.{f}" for f in ("input_shape", "input_dtype", "task", "vocab_size")}}
LOCAL_PATHS = ("data_dir", "save_weights")   # options whose value is a folder of the machine that ran the case
DEFAULTS = {f.name: f.default for f in dataclasses.fields(PlanRequest)} | {"device_counts": 1}


def rerun_arguments(case: Case, local_paths: bool = True) -> tuple[list[str], dict[str, Any]]:
    """(the arguments after ``xpubench`` that plan ``case`` again, the case's options no flag can give)."""
    if case.mode == "serve":
        from xpubench.serve.rerun import serve_arguments

        return serve_arguments(case), {}
    words = ["run"]
    for option in OPTIONS:
        if option.flags and (local_paths or option.name not in LOCAL_PATHS):
            words += _flag(option, _value(case, option))
    words += _mode(case)
    unsaid = _without_a_flag(case)
    quick = dict(get_workload(case.workload).quick_options) if case.workload in REGISTRY else {}
    if unsaid and unsaid.items() <= quick.items():
        return [*words, "--quick"], {}
    return words, unsaid


def rerun_command(case: Case, local_paths: bool = True) -> str:
    """The shell command that plans ``case`` again, each word quoted (a name from a file never becomes a
    command when pasted); options no flag gives follow it as a comment."""
    words, unsaid = rerun_arguments(case, local_paths)
    config = ", ".join(f"{k} = {json.dumps(v)}" for k, v in unsaid.items())
    return shlex.join(["xpubench", *words]) + (f"   # with a --config file's [run.options]: {config}" if unsaid else "")


def _value(case: Case, option: Option) -> Any:
    where, _, name = option.goes.partition(".")
    if where == "options":
        rows = [row for _, row in option_rows() if row.key == name and row.is_list]
        # a swept list option: the case holds one value, under its key or a case's own (behaviours -> behaviour)
        return case.options.get(name, case.options.get(name.removesuffix("s")) if rows else None)
    if where != "request" or name not in IN_CASE or (name == "workloads" and case.options.get("model")):
        return None   # (a user's model is named by --model: its workload is the planner's name for it)
    first, *rest = IN_CASE[name].split(".")
    value = getattr(case, first)
    for key in rest:
        value = value.get(key) if isinstance(value, Mapping) else None
    if name == "target" and value == DEFAULT_TARGET:
        return None   # the workload's own target: --mode time-to-target says it (_mode)
    return None if value == DEFAULTS.get(name) else value


def _flag(option: Option, value: Any) -> list[str]:
    flag = option.flags[0]   # as typed: -w, -b, -d, -p where an option has a short flag
    if value is None or value is False or value == "":
        return []
    if option.action == "store_true":
        return [flag]
    if isinstance(value, (list, tuple)):
        value = ",".join(map(str, value))
    return [flag, str(value)]


def _mode(case: Case) -> list[str]:
    """--mode of the case (generation is asked as infer; a case with the workload's target, time-to-target)."""
    if case.mode == "matmul":
        return []
    if case.options.get("target") == DEFAULT_TARGET:
        return ["--mode", TIME_TO_TARGET]
    return ["--mode", "infer" if case.mode == "generate" else case.mode]


def _without_a_flag(case: Case) -> dict[str, Any]:
    """The workload options the case holds that no flag gives (those the planner derives aside: weights_id)."""
    flagged = {o.goes.partition(".")[2] for o in OPTIONS if o.flags and o.goes.startswith("options.")}
    rows = {row.key for name, row in option_rows() if name == case.workload}
    return {k: v for k, v in case.options.as_dict().items()
            if k in rows and k not in flagged}
