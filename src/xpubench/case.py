"""The case: the one value every layer passes (the planner makes it, the runner starts a worker with it,
the worker's loop reads it, the results file records it). Framework-free and registry-free, so every
layer may import it.

A case is one workload x backend x device x mode x precision x batch size (or matrix size, or a
serving point's users and rate) x device count, with the run-length knobs beside. Everything the worker
needs is in the Case; nothing is read from globals.

A Case is *resolved* (docs/architecture.md, "The resolved case"): the planner made every choice, so
nothing downstream applies a default of its own. It is checked when it is made: a model case (train,
infer, generate) without a batch size, or a count that is not a whole number, is refused
(``UnresolvedCase``), and its ``options`` are read-only. (A matmul case's size is the planner's too; a
case without one is how ``xpubench doctor`` asks a backend for its matmul of any size.)
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

SYNC_MODES = ("step", "epoch")   # training's synchronisation modes (harness/training.py)
DATA_SOURCES = ("synthetic", "real")        # a case's data, the default first (data/)
COMPILE_SETTINGS = ("auto", "on", "off")    # a case's compile setting, the default first (backends' trainers)
MODEL_MODES = ("train", "infer", "generate")   # the modes that run a model at a batch size (launch/dispatch.py)
SERVE = "serve"                                 # a server under load: a point of users (and a rate), no batch size
SERVING_FIELDS = ("users", "rate")             # a serving point's own fields (``Case._fields``)
SERVE_KEY_OPTIONS = ("input_len", "output_len", "endpoint")   # a serving point's options in its key


class UnresolvedCase(ValueError):
    """A case missing what the planner decides (a batch size, a matrix size): nothing downstream of the
    planner fills it in."""


@dataclass(frozen=True, eq=False, kw_only=True)
class Options(Mapping):
    """A case's options, read-only. A workload declares its own as a subclass (``Workload.Options``: frozen,
    one typed field with its default per option); the planner builds it once (``Options.of``) and the
    worker, the estimates and the reports read its fields. What the subclass does not declare (the run's
    ``sync``, ``target``, ``price_per_hour``, a user's ``model``; keys of older files) is kept as given in
    ``extra``. As a mapping, and in the record, it is what was given (``as_dict``): a field at its default
    that was not given is left out, so a case's key and run id are those of its options as given."""

    extra: Mapping[str, Any] = field(default_factory=dict)
    given: frozenset[str] = frozenset()   # the declared fields that were given (``of``)

    @classmethod
    def declared(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in ("extra", "given"))

    @classmethod
    def of(cls, options: Mapping[str, Any] | None) -> Options:
        """The options of a case's options mapping (a record's, a request's): the declared fields from
        their keys, every other key in ``extra``. An instance of ``cls`` already is its own."""
        if type(options) is cls:
            return options
        rest = dict(options or {})
        own = {k: rest.pop(k) for k in cls.declared() if k in rest}
        return cls(**own, extra=rest, given=frozenset(own))

    def unresolved(self) -> str | None:
        """What a case with these options lacks that only the planner decides (None: nothing); a
        workload's ``Options`` says (llama: a --weights checkpoint not pinned, a sweep not split)."""
        return None

    def replace(self, **changes: Any) -> Options:
        """These options with ``changes`` (a new instance: a case's options are never changed)."""
        return type(self).of({**self.as_dict(), **changes})

    def as_dict(self) -> dict[str, Any]:
        return {**{k: getattr(self, k) for k in self.declared() if k in self.given}, **self.extra}

    def __getitem__(self, key: str) -> Any:
        return self.as_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.as_dict()!r})"


@dataclass(frozen=True)
class Case:
    workload: str
    backend: str
    device: str                      # resolved device id: "cpu", "gpu:0", "tpu:0", "mps"
    mode: str                        # "matmul" | "train" | "infer" | "generate" | "serve"
    precision: str = "fp32"
    batch_size: int | None = None    # per device
    size: int | None = None          # matmul N
    users: int | None = None         # serve: closed loop, the users; open loop, the cap on requests in flight
    rate: float | None = None        # serve, open loop: Poisson arrivals per second (None: closed loop)
    devices: int = 1                 # data-parallel device count
    epochs: int | None = None
    steps: int | None = None         # cap on steps per epoch
    train_samples: int | None = None
    eval_samples: int | None = None
    time_budget_s: float | None = None
    data: str = DATA_SOURCES[0]
    data_dir: str | None = None
    compile: str = COMPILE_SETTINGS[0]
    seed: int = 0
    options: Options = field(default_factory=Options)  # the workload's own (typed) and the run's extras
    # the options that are part of the case's identity (its workload's key options: gpt's preset, the
    # selftest's behaviour); set by the planner from the workload's record
    key_options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.options, Options):   # a mapping (a record's, a test's): its keys as given
            object.__setattr__(self, "options", Options.of(self.options))
        for name in ("batch_size", "size", "users", "devices", "epochs", "steps", "train_samples", "eval_samples"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise UnresolvedCase(f"a case's {name} is a whole number of at least 1, got {value!r}")
        if self.rate is not None and (isinstance(self.rate, bool) or not isinstance(self.rate, (int, float))
                                      or not 0 < self.rate < float("inf")):
            raise UnresolvedCase(f"a case's rate is a number of requests per second above 0, got {self.rate!r}")
        if self.rate is not None:
            object.__setattr__(self, "rate", float(self.rate))   # 2 and 2.0 are one case, one run id
        if self.mode in MODEL_MODES and self.batch_size is None:
            raise UnresolvedCase(f"{self.workload} {self.mode} case without a batch size: the planner resolves it")
        if self.mode == SERVE and self.users is None:
            raise UnresolvedCase(f"{self.workload} serve case without its users: the planner resolves them")
        if (lacks := self.options.unresolved()) is not None:
            raise UnresolvedCase(f"{self.workload} {self.mode} case {lacks}: the planner resolves it")

    @property
    def key(self) -> str:
        """Identity of what is measured (not how long): used to match cases across runs and files."""
        parts = [self.workload, self.backend, self.device, self.mode, self.precision,
                 f"b{self.batch_size}" if self.batch_size else "", f"n{self.size}" if self.size else "",
                 f"c{self.users}" if self.users else "", f"r{self.rate:g}" if self.rate else "",
                 f"x{self.devices}" if self.devices != 1 else "", self.data if self.data != DATA_SOURCES[0] else "",
                 *(str(self.options.get(k, "")) for k in self.key_options),
                 str(self.options.get("model", "")).rpartition(":")[0],   # a user's model: its file as given
                 f"to:{self.options['target']}" if self.options.get("target") else ""]   # a quality target
        return "/".join(p for p in parts if p)

    @property
    def global_batch(self) -> int | None:
        """Samples per step over all its devices: the per-device batch x the device count (None: no batch,
        a matmul case). The planner's estimate and the worker's training set-up read it."""
        return self.batch_size * self.devices if self.batch_size else None

    @property
    def run_id(self) -> str:
        """Identity of the whole case, run-length knobs included: used by --resume. ``key_options`` is
        left out (it follows from the workload), so plans written before it existed keep their ids."""
        fields = self._fields()
        fields.pop("key_options")
        return hashlib.sha1(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]

    def as_dict(self) -> dict[str, Any]:
        d = self._fields()
        d["key_options"] = list(self.key_options)
        d["key"] = self.key
        d["run_id"] = self.run_id
        return d

    def _fields(self) -> dict[str, Any]:
        """Every field; a serving point's ``users`` and ``rate`` only where set, so the run id of every
        other case is what it was before they existed (a plan written then resumes)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "options"
                  and not (f.name in SERVING_FIELDS and getattr(self, f.name) is None)}
        return {**copy.deepcopy(fields), "options": copy.deepcopy(self.options.as_dict())}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Case:
        """The case a record holds. A record written before ``key_options`` existed lacks it: the planner's
        ``workloads.with_identity`` fills it from the workload."""
        names = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in d.items() if k in names}
        if "key_options" in fields:
            fields["key_options"] = tuple(fields["key_options"])
        return cls(**fields)
