"""The case: the one value every layer passes (the planner makes it, the runner starts a worker with it,
the worker's loop reads it, the results file records it). Framework-free and registry-free, so every
layer may import it.

A case is one workload x backend x device x mode x precision x batch size (or matrix size) x device
count, with the run-length knobs beside. Everything the worker needs is in the Case; nothing is read
from globals.

A Case is *resolved* (docs/architecture.md, "The resolved case"): the planner made every choice, so
nothing downstream applies a default of its own. It is checked when it is made: a model case (train,
infer, generate) without a batch size, or a count that is not a whole number, is refused
(``UnresolvedCase``), and its ``options`` are read-only. (A matmul case's size is the planner's too; a
case without one is how ``xpubench doctor`` asks a backend for its matmul of any size.)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

SYNC_MODES = ("step", "epoch")   # training's synchronisation modes (harness/training.py)
MODEL_MODES = ("train", "infer", "generate")   # the modes that run a model at a batch size (launch/dispatch.py)


class UnresolvedCase(ValueError):
    """A case missing what the planner decides (a batch size, a matrix size): nothing downstream of the
    planner fills it in."""


class Options(dict):
    """A case's options, read-only (a dict for JSON and for readers; every mutation refused). A changed
    case is a new one: ``dataclasses.replace(case, options={**case.options, key: value})``."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("a case's options are read-only: make a new case (dataclasses.replace)")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __reduce__(self):   # pickle and copy build it whole (they would set item by item)
        return Options, (dict(self),)


@dataclass(frozen=True)
class Case:
    workload: str
    backend: str
    device: str                      # resolved device id: "cpu", "gpu:0", "tpu:0", "mps"
    mode: str                        # "matmul" | "train" | "infer" | "generate"
    precision: str = "fp32"
    batch_size: int | None = None    # per device
    size: int | None = None          # matmul N
    devices: int = 1                 # data-parallel device count
    epochs: int | None = None
    steps: int | None = None         # cap on steps per epoch
    train_samples: int | None = None
    eval_samples: int | None = None
    time_budget_s: float | None = None
    data: str = "synthetic"          # "synthetic" | "real"
    data_dir: str | None = None
    compile: str = "auto"            # "auto" | "on" | "off"
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)  # backend/workload specific extras
    # the options that are part of the case's identity (its workload's key options: gpt's preset, the
    # selftest's behaviour); set by the planner from the workload's record
    key_options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.options, Options):
            object.__setattr__(self, "options", Options(self.options or {}))
        for name in ("batch_size", "size", "devices", "epochs", "steps", "train_samples", "eval_samples"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise UnresolvedCase(f"a case's {name} is a whole number of at least 1, got {value!r}")
        if self.mode in MODEL_MODES and self.batch_size is None:
            raise UnresolvedCase(f"{self.workload} {self.mode} case without a batch size: the planner resolves it")

    @property
    def key(self) -> str:
        """Identity of what is measured (not how long): used to match cases across runs and files."""
        parts = [self.workload, self.backend, self.device, self.mode, self.precision,
                 f"b{self.batch_size}" if self.batch_size else "", f"n{self.size}" if self.size else "",
                 f"x{self.devices}" if self.devices != 1 else "", self.data if self.data != "synthetic" else "",
                 *(str(self.options.get(k, "")) for k in self.key_options),
                 str(self.options.get("model", "")).rpartition(":")[0],   # a user's model: its file as given
                 f"to:{self.options['target']}" if self.options.get("target") else ""]   # a quality target
        return "/".join(p for p in parts if p)

    @property
    def run_id(self) -> str:
        """Identity of the whole case, run-length knobs included: used by --resume. ``key_options`` is
        left out (it follows from the workload), so plans written before it existed keep their ids."""
        fields = dataclasses.asdict(self)
        fields.pop("key_options")
        return hashlib.sha1(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["key_options"] = list(self.key_options)
        d["key"] = self.key
        d["run_id"] = self.run_id
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Case:
        """The case a record holds. A record written before ``key_options`` existed lacks it: the planner's
        ``plan.with_identity`` fills it from the workload."""
        names = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in d.items() if k in names}
        if "key_options" in fields:
            fields["key_options"] = tuple(fields["key_options"])
        return cls(**fields)
