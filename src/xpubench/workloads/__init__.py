"""Workload registry: adding a workload is one module (its ``WORKLOAD = Workload(...)`` record,
workloads/base.py) plus one line here."""

from __future__ import annotations

import dataclasses
import importlib

from xpubench.errors import UserError
from xpubench.workloads.base import Workload, WorkloadOption

# name -> module path; the order is the default run's and `xpubench list`'s
REGISTRY: dict[str, str] = {
    "matmul": "xpubench.workloads.matmul",
    "mnist_cnn": "xpubench.workloads.mnist_cnn",
    "fashion_cnn": "xpubench.workloads.fashion_cnn",
    "cifar10_resnet": "xpubench.workloads.cifar10_resnet",
    "imdb_lstm": "xpubench.workloads.imdb_lstm",
    "shakespeare_lstm": "xpubench.workloads.shakespeare_lstm",
    "weather_gru": "xpubench.workloads.weather_gru",
    "gpt": "xpubench.workloads.gpt",
    "llama": "xpubench.workloads.llama.workload",
    "selftest": "xpubench.workloads.selftest",
}

# workloads made at run time, in this process only: a user's model (xpubench.usermodel.load)
RUNTIME: dict[str, Workload] = {}


def register_runtime(workload: Workload) -> None:
    """Make ``workload`` (a user's model) known by its name in this process, so that every trainer and
    session finds it with ``get_workload``."""
    if workload.name in REGISTRY:
        raise ValueError(f"{workload.name!r} is a built-in workload")
    RUNTIME[workload.name] = workload


def get_workload(name: str) -> Workload:
    """The workload's record (its module's ``WORKLOAD``); an unknown name is a UserError."""
    if name in RUNTIME:
        return RUNTIME[name]
    if name not in REGISTRY:
        raise UserError(f"unknown workload {name!r}; choose from: {', '.join(offered())} "
                        "(`xpubench list` describes them)")
    return importlib.import_module(REGISTRY[name]).WORKLOAD


def names(kind: str | None = None) -> list[str]:
    """The built-in workloads in registry order; only those of ``kind`` ("model", "transformer",
    "matmul", "selftest") when given."""
    return [name for name in REGISTRY if kind is None or get_workload(name).kind == kind]


def offered() -> list[str]:
    """The built-in workloads a user is offered (-w's help, an unknown name's error): every one but the
    isolation check (the selftest), which stays unlisted."""
    return [name for name in REGISTRY if get_workload(name).kind != "selftest"]


def default_run() -> list[str]:
    """The workloads ``xpubench run`` plans without -w (``in_default_run``), in registry order."""
    return [name for name in REGISTRY if get_workload(name).in_default_run]


def option_rows() -> list[tuple[str, WorkloadOption]]:
    """(workload name, row) for every built-in workload's own options, in registry order."""
    return [(name, row) for name in REGISTRY for row in get_workload(name).options]


def check_options(options: dict, workloads: list[str] | None = None) -> None:
    """Refuse bad values of the workloads' own options among a request's ``options`` (UserError): every
    workload one of whose keys is given checks them all (its ``check_options``: gpt configures its spec,
    the selftest expands its behaviours), then each given row its own value. A key that one of the
    ``workloads`` the request runs declares is theirs: another workload that shares it (gpt's and
    llama's --preset) does not check it."""
    requested = [w for w in workloads or () if w in REGISTRY]
    theirs = {row.key for name in requested for row in get_workload(name).options}
    for name in REGISTRY:
        workload = get_workload(name)
        seen = options if name in requested or workloads is None else {
            k: v for k, v in options.items() if k not in theirs}
        given = [row for row in workload.options if row.key in seen]
        if given and workload.check_options is not None:
            workload.check_options(seen)
        for row in given:
            row.check(seen[row.key])


def with_identity(case):
    """A case read from a record or a case file, with its workload's typed options (``Workload.Options``,
    read from the recorded mapping: nothing is resolved again) and, for a record written before cases
    carried them, its ``key_options`` (case.py: ``Case.key`` reads them). A workload this xpubench does
    not know keeps its options as given and no key options."""
    if case.workload not in REGISTRY:
        return case
    workload = get_workload(case.workload)
    options = workload.options_of(case.options)
    if case.key_options and options is case.options:
        return case
    return dataclasses.replace(case, key_options=case.key_options or workload.key_options, options=options)


def _own_key_options(case) -> tuple[Workload | None, tuple[str, ...]]:
    """(workload record or None, the case's key options less its workload's backend options) of a case."""
    workload = get_workload(case.workload) if case.workload in REGISTRY else None
    dropped = workload.backend_options() if workload else frozenset()
    return workload, tuple(k for k in case.key_options if k not in dropped)


def alike(case) -> str:
    """What two cases of one workload must share to be compared side by side (issue 52 item 2): their key
    options' values as given, less the backend options (torch's --decode: a variant of one backend, which
    the row's label names instead: ``Backend.variant``)."""
    return "/".join(str(case.options.get(k, "")) for k in _own_key_options(case)[1])


def options_text(case) -> str:
    """A case's given key options in words, as a row label carries them wherever they differ from the
    workload's defaults (its ``describe_options``; else "name value"): "4/30 layers, pp64, tg16"; not its
    backend options (torch's decode step: a variant of one backend, ``Backend.variant``); "" where none
    was given."""
    workload, names = _own_key_options(case)
    given = {k: case.options[k] for k in names if k in case.options}
    if workload and workload.describe_options:
        return ", ".join(workload.describe_options(given))
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in given.items())
