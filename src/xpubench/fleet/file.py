"""The fleet file: a ``[run]`` table of `xpubench run` options under the keys ``--config`` files use, and
one or more ``[[machine]]`` tables, each a ``name`` and exactly one engine (fleet/engines/). Read and
checked whole before anything is written or submitted: one line for the first problem.

    [run]
    workload = ["matmul", "mnist_cnn"]
    processes = 2

    [[machine]]
    name = "gpu-node"
    slurm = { partition = "gpu", time = "00:20:00", gres = "gpu:1" }
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xpubench.errors import UserError
from xpubench.fleet import engines
from xpubench.legible.plaintext import shown

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")   # a file name in DIR: no /, no .., no space or control
FORBIDDEN_RUN_KEYS = {"output": "the fleet writes DIR/<name>.jsonl for each machine: drop output from [run]"}


@dataclass(frozen=True)
class Machine:
    """One ``[[machine]]``: its name, its engine, the engine's settings and the entry's other keys."""

    name: str
    engine: str
    settings: dict
    options: dict

    @property
    def tasks(self) -> int:
        """Processes of a run started across hosts by the engine (``ntasks``, else ``nodes``), 1 otherwise."""
        return int(self.options.get("ntasks") or self.options.get("nodes") or 1)

    def record(self) -> dict:
        """The entry as each result's fingerprint records it (``fleet_machine``, results/validate.py)."""
        return {"name": self.name, "engine": self.engine, **({"settings": self.settings} if self.settings else {}),
                **self.options}

    def record_json(self) -> str:
        return json.dumps(self.record(), sort_keys=True)


@dataclass(frozen=True)
class FleetFile:
    path: Path
    text: str                    # as given: DIR/fleet.toml is this text, the runs' --config
    run: dict                    # the [run] table
    machines: tuple[Machine, ...]


def check_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name) or ".." in name:
        raise UserError(f"{where}name '{shown(name)}' is not a file name: use letters, digits, '.', '_' and '-' "
                        "(at most 63, starting with a letter or digit; no '/', '..', space or control character)")
    return name


def _kind_ok(kind: str, value: Any) -> bool:
    if kind == "text":
        return isinstance(value, str) and bool(value.strip())
    if kind == "texts":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "whole":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1
    if kind == "table":
        return isinstance(value, dict)
    if kind == "flag":
        return value is True
    raise ValueError(kind)


KIND_WORDS = {"text": "a string", "texts": "a list of strings", "whole": "a whole number of at least 1",
              "table": "a table", "flag": "true"}


def _checked(table: dict, kinds: dict[str, str], where: str) -> dict:
    unknown = sorted(k for k in table if k not in kinds)
    if unknown:
        raise UserError(f"{where}unknown key(s) {', '.join(map(shown, unknown))} (known: {', '.join(sorted(kinds))})")
    for key, value in table.items():
        if not _kind_ok(kinds[key], value):
            raise UserError(f"{where}{key} must be {KIND_WORDS[kinds[key]]}, got {shown(repr(value))[:60]}")
    return dict(table)


def _machine(entry: Any, index: int, where: str) -> Machine:
    at = f"{where}[[machine]] {index + 1}: "
    if not isinstance(entry, dict):
        raise UserError(f"{at}must be a table")
    if "name" not in entry:
        raise UserError(f"{at}has no name")
    name = check_name(entry["name"], at)
    at = f"{where}machine {name!r}: "
    named = [k for k in engines.NAMES if k in entry]
    if len(named) != 1:
        said = "no engine" if not named else f"two engines ({', '.join(named)})"
        raise UserError(f"{at}{said}: give exactly one of {', '.join(engines.NAMES)}")
    engine = engines.get(named[0])
    rest = {k: v for k, v in entry.items() if k not in ("name", named[0])}
    value = entry[named[0]]
    if engine.keys is None:
        settings = engine.settings(value, at)
    else:
        if not isinstance(value, dict):
            raise UserError(f"{at}{named[0]} must be a table, e.g. {named[0]} = {{ ... }}")
        settings = _checked(value, engine.keys, f"{at}{named[0]}: ")
        missing = [k for k in engine.required if k not in settings]
        if missing:
            raise UserError(f"{at}{named[0]} needs {', '.join(missing)}")
    for key in ("nodes", "ntasks"):
        if key in rest and key not in engine.machine_keys:
            raise UserError(f"{at}{key} goes with slurm (a run the engine starts on several hosts); {named[0]} "
                            "runs on one host")
    others = [k for k in rest if k not in engine.machine_keys and k not in engines.NAMES]
    if others:
        raise UserError(f"{at}unknown key(s) {', '.join(map(shown, sorted(others)))} (a {named[0]} machine takes "
                        f"name, {named[0]}{''.join(', ' + k for k in sorted(engine.machine_keys))})")
    return Machine(name, named[0], settings, _checked(rest, engine.machine_keys, at))


def parse(data: dict, text: str, path: Path) -> FleetFile:
    where = f"fleet file {shown(path)}: "
    unknown = sorted(k for k in data if k not in ("run", "machine"))
    if unknown:
        raise UserError(f"{where}unknown key(s) {', '.join(map(shown, unknown))} (known: [run], [[machine]])")
    run = data.get("run", {})
    if not isinstance(run, dict):
        raise UserError(f"{where}[run] must be a table of `xpubench run` options")
    for key, why in FORBIDDEN_RUN_KEYS.items():
        if key in run:
            raise UserError(f"{where}[run] {key}: {why}")
    _check_run(run, where)
    entries = data.get("machine")
    if not isinstance(entries, list) or not entries:
        raise UserError(f"{where}no [[machine]]: give one or more, each with a name and one engine")
    machines = tuple(_machine(e, i, where) for i, e in enumerate(entries))
    seen: set[str] = set()
    for m in machines:
        if m.name.lower() in seen:   # DIR/<name>.jsonl: one file per name, on case-blind file systems too
            raise UserError(f"{where}two machines named {m.name!r}: each machine's results go to DIR/<name>.jsonl")
        seen.add(m.name.lower())
    return FleetFile(path, text, run, machines)


def _check_run(run: dict, where: str) -> None:
    """[run] as `xpubench run --config` reads it, checked as the run would check it before anything runs."""
    from xpubench.launch.orchestration import check_run_settings
    from xpubench.plan import PlanRequest, options_given
    from xpubench.plan.validation import validate

    fields, settings = options_given.split(options_given.from_config(run, f"{where}[run] "))
    validate(PlanRequest(**fields))
    check_run_settings(settings.get("timeout"), settings.get("memory_limit"), settings.get("processes"))


def read(path: str | Path) -> FleetFile:
    from xpubench import readfile
    from xpubench.plan.options_text import MAX_TEXT

    text = readfile.read_text(path, "fleet file", MAX_TEXT, hint=": give a TOML file")
    return parse(readfile.loads_toml(text, f"fleet file {shown(path)}"), text, Path(path))
