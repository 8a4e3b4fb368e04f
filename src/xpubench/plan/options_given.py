"""The options given, read through the table of plan/options.py (``OPTIONS``): the `run` parser's flags
(``add_run_arguments``, ``from_flags``), a config file's keys (``read_config``, ``from_config``) and the
notebook API's keywords (``request_fields``), each read into {option name: value}, then split into
PlanRequest fields and run settings (``split``; cli.run.request_from and api._request both use it), and the
flags ``--resume`` refuses (``refused_with_resume``) or takes (``with_resume_flags``).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from xpubench.errors import UserError
from xpubench.plan import options_text as read
from xpubench.plan.options import BY_NAME, CONFIG_KEYS, OPTIONS, flag
from xpubench.plan.request import PlanRequest


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The `run` subcommand's flags, from OPTIONS."""
    for o in OPTIONS:
        if not o.flags:
            continue
        kw = {"dest": o.name, "help": o.help}
        if o.action == "store_true":
            kw["action"] = "store_true"
        else:
            kw.update(default=None, type=o.type, choices=o.choices, metavar=o.metavar)
            if o.action is not None:
                kw["action"] = o.action
        parser.add_argument(*o.flags, **{k: v for k, v in kw.items() if v is not None or k == "default"})


def _given(value) -> bool:
    return value is not None and value is not False


def from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """{option name: value} of the flags given (not ``cli`` ones)."""
    return {o.name: getattr(args, o.name) for o in OPTIONS
            if o.flags and o.goes != "cli" and _given(getattr(args, o.name, None))}


def from_config(section: dict, where: str) -> dict[str, Any]:
    """{option name: value} of a TOML table (a config file's [run], or keywords); unknown keys refused."""
    unknown = sorted(k for k in section if k not in CONFIG_KEYS)
    if unknown:
        raise UserError(f"{where}unknown option(s) {', '.join(unknown)}; known: {', '.join(CONFIG_KEYS)}")
    values = {}
    for key, value in section.items():
        o = BY_NAME[key]
        if o.is_list and not isinstance(value, list):
            value = [value]
        if o.toml is not None:
            try:
                value = o.toml(value)
            except argparse.ArgumentTypeError as exc:
                raise UserError(f"{where}{key}: {exc}") from None
        if _given(value):
            values[key] = value
    return values


def read_config(path: str) -> dict[str, Any]:
    """--config FILE: its [run] table (or the whole file) -> {option name: value}."""
    data = read.read_toml(path, "config file")
    section = data.get("run", data)
    if not isinstance(section, dict):
        raise UserError(f"config file {path}: [run] must be a table of options")
    return from_config(section, f"config file {path}: ")


def split(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """{option name: value} -> (PlanRequest fields, run settings), in the order of OPTIONS (a later
    option adds to a table an earlier one filled: --price-per-hour over --prices)."""
    fields: dict[str, Any] = {}
    run: dict[str, Any] = {}
    for o in OPTIONS:
        if o.name not in values:
            continue
        value = values[o.name]
        where, _, name = o.goes.partition(".")
        if where == "request":
            earlier = fields.get(name)
            fields[name] = {**earlier, **value} if isinstance(earlier, dict) and isinstance(value, dict) else value
        elif where == "options":
            fields["options"] = {**fields.get("options", {}), name: value}
        elif where == "run":
            run[name] = value
    return fields, run


PLAN_LISTS = {f.name for f in dataclasses.fields(PlanRequest) if str(f.type).startswith("list")}


def request_fields(keywords: dict[str, Any]) -> dict[str, Any]:
    """Keywords of xpubench.run / plan -> PlanRequest fields: a field's own name (``workloads=["matmul"]``,
    a single value for a list) or an option's TOML key (``workload="matmul"``, ``sync="epoch"``). A
    field's name wins: ``devices=["cpu"]`` names devices (the TOML key ``devices``, a count, is
    ``device_counts=[2]`` here)."""
    names = {f.name for f in dataclasses.fields(PlanRequest)}
    direct = {k: [v] if k in PLAN_LISTS and isinstance(v, (str, int)) else v for k, v in keywords.items()
              if k in names}
    keys = {o.name for o in OPTIONS if o.in_config and o.goes.split(".")[0] in ("request", "options")}
    unknown = sorted(set(keywords) - names - keys)
    if unknown:
        raise UserError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(names | keys))}")
    fields, _ = split(from_config({k: v for k, v in keywords.items() if k not in names}, ""))
    if isinstance(direct.get("options"), dict) and "options" in fields:
        fields["options"] = {**direct["options"], **fields["options"]}
    return {**direct, **fields}


def refused_with_resume(args: argparse.Namespace) -> list[str]:
    """The flags given that --resume refuses (the plan, the output and the processes come from the file)."""
    return [flag(o) for o in OPTIONS if o.flags and not o.with_resume and _given(getattr(args, o.name, None))]


def with_resume_flags() -> list[str]:
    """The run settings --resume takes: --timeout and --memory-limit."""
    return [flag(o) for o in OPTIONS if o.with_resume and o.goes.startswith("run.")]
