"""The versioned records of a results file, and the case-level result the reports read.

A line of a results file is a :class:`Run`: what ONE worker process measured for one case. A case is
measured by several processes (``--processes K``, interleaved with the other cases), so a case has up
to K lines; :func:`xpubench.results.fold.aggregate` folds them into one :class:`Result`.

Version history (a loader reads every version up to SCHEMA_VERSION and refuses newer ones):
  1  first version: one record per case (one process).
  2  one record per worker process: ``process`` (0-based index), ``processes`` (how many the run
     planned for the case) and ``machine`` (load, clock and steal time around the process). A version 1
     record reads as process 0 of 1 with no machine state.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from xpubench.case import SERVE, SERVE_KEY_OPTIONS, Case
from xpubench.errors import UserError
from xpubench.results.validate import Invalid, check_run

SCHEMA_VERSION = 2
STATUSES = ("ok", "oom", "timeout", "crash", "error", "skipped")
# an error from bad input found inside the worker (a missing or corrupt file): the user can fix it, so
# --resume runs such a case again; every other status is final (a crash or an OOM would only repeat)
USER_ERRORS = ("UserError", "DataUnavailable")


@dataclass
class Run:
    """What one worker process measured for one case (or why it could not): one line of a results file."""

    case: dict[str, Any]                                      # the Case that ran (case.Case.as_dict())
    status: str                                               # one of STATUSES
    message: str = ""                                         # error text, skip reason, warnings
    metrics: dict[str, Any] = field(default_factory=dict)     # flat scalars: medians, rates, MFU...
    samples: dict[str, list[float]] = field(default_factory=dict)  # raw samples, seconds
    series: dict[str, list[float]] = field(default_factory=dict)   # per-epoch curves (loss, accuracy)
    artifacts: dict[str, Any] = field(default_factory=dict)   # small extras (misclassified test images)
    placement: str | None = None                              # the device that actually ran the work
    fingerprint: dict[str, Any] = field(default_factory=dict)  # where and with what it ran
    started_at: str = ""                                      # ISO-8601 UTC
    duration_s: float | None = None                           # wall time of the worker process
    process: int = 0                                          # which of the case's processes (0-based)
    processes: int = 1                                        # how many the run planned for the case
    machine: dict[str, Any] = field(default_factory=dict)     # results/machine.py: load, clock, steal
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")
        if not (isinstance(self.process, int) and isinstance(self.processes, int) and 0 <= self.process
                and self.processes >= 1) or isinstance(self.process, bool):
            raise ValueError(f"bad process index {self.process!r} of {self.processes!r}")

    def to_json(self) -> str:
        """One line of strict JSON; NaN and infinities (a diverged loss) are written as null."""
        return json.dumps(finite(asdict(self)), sort_keys=True, allow_nan=False, default=_jsonable)

    @property
    def key(self) -> str:
        return self.case.get("key", "")


@dataclass
class Result:
    """One case: its processes' runs folded together (results/fold.py). With one process, every
    field is that run's own; with several, ``metrics`` hold the median over the processes that ended ok
    (the headline time's interval from both levels), ``samples`` every such process's samples in turn."""

    case: dict[str, Any]
    status: str
    message: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    samples: dict[str, list[float]] = field(default_factory=dict)
    series: dict[str, list[float]] = field(default_factory=dict)
    artifacts: dict[str, Any] = field(default_factory=dict)
    placement: str | None = None
    fingerprint: dict[str, Any] = field(default_factory=dict)
    started_at: str = ""                                      # the first process's start
    duration_s: float | None = None                           # wall time of all its processes together
    runs: list[Run] = field(default_factory=list)             # the processes, in the order they ran
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    @property
    def key(self) -> str:
        return self.case.get("key", "")

    @property
    def ok_runs(self) -> list[Run]:
        return [r for r in self.runs if r.status == "ok"]


def retryable(run: Run | Result) -> bool:
    """The run failed on bad input found in its worker (USER_ERRORS), or a stop cut it short (a serving
    point's finished requests, kept: ``interrupted``): --resume runs it again, its record replaced."""
    return (run.status == "error" and run.metrics.get("error_type") in USER_ERRORS) or cut_short(run)


def cut_short(run: Run | Result) -> bool:
    """A stop (Ctrl-C, SIGTERM, SIGHUP) ended it with what it had measured (results/modes.py ``keeps_cut``)."""
    return run.metrics.get("interrupted") is True


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy array or scalar
        return finite(value.tolist())
    if hasattr(value, "item"):
        return finite(value.item())
    return str(value)  # never lose a whole record over one odd value


def finite(value: Any) -> Any:
    """Replace NaN/inf floats (not valid JSON) with None, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def _migrate(record: dict[str, Any], version: int) -> dict[str, Any]:
    """Bring an older record up to SCHEMA_VERSION. Version 1 (one record per case) is process 0 of 1. A
    serving point written before cases had ``users`` is read as one written now (``_serving_point``)."""
    if version < 2:
        record.setdefault("process", 0)
        record.setdefault("processes", 1)
        record.setdefault("machine", {})
    case = record.get("case")
    if isinstance(case, dict) and case.get("mode") == SERVE and "users" not in case and "batch_size" in case:
        record["case"] = _serving_point(case, record.get("fingerprint"))
    return record


def _serving_point(case: dict[str, Any], prints: Any) -> dict[str, Any]:
    """A serving point as ``xpubench serve`` wrote it before serving was planned: its users in ``batch_size``,
    its load an option ("closed", "poisson 2 rps"), its backend "http" and the server it started named only
    in the fingerprint's backends (the one that carries the server's description; "remote" for a --url).
    Read as written now, and keyed so (case.py): the same point of an older and a newer file compare."""
    options = dict(case.get("options") or {})
    load = str(options.pop("load", "closed")).split()
    described = [name for name, b in ((prints or {}).get("backends") or {}).items() if isinstance(b, dict)
                 and "server" in b]
    backend = described[0] if described and described[0] != "remote" else case.get("backend")
    if backend != case.get("backend"):
        options.pop("url", None)    # the address a server started for the sweep had: gone with it
    try:
        rate = float(load[1]) if load[0] == "poisson" else None
        point = Case.from_dict({**case, "backend": backend, "users": case.get("batch_size"), "batch_size": None,
                                "rate": rate, "options": options, "key_options": SERVE_KEY_OPTIONS})
    except (IndexError, TypeError, ValueError):
        return {**case, "users": case.get("batch_size"), "batch_size": None}   # refused by the checks after
    return point.as_dict()


def run_from_dict(record: Any, *, where: str) -> Run:
    """Validate and migrate one decoded JSON record; ``where`` names it in the error line."""
    if not isinstance(record, dict):
        raise UserError(f"{where}: not a result record (expected a JSON object)")
    version = record.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise UserError(f"{where}: no schema_version: not an xpubench result file")
    if version > SCHEMA_VERSION:
        raise UserError(
            f"{where}: schema version {version} is newer than this xpubench reads ({SCHEMA_VERSION}); "
            "upgrade xpubench"
        )
    if version < 1:
        raise UserError(f"{where}: unknown schema version {version} (this xpubench reads 1 to "
                        f"{SCHEMA_VERSION}): not an xpubench results file")
    record = _migrate(dict(record), version)
    record["schema_version"] = SCHEMA_VERSION
    try:
        check_run(record)
    except Invalid as exc:
        raise UserError(f"{where}: malformed result record ({exc})") from None
    known = set(Run.__dataclass_fields__)
    try:
        return Run(**{k: v for k, v in record.items() if k in known})
    except (TypeError, ValueError) as exc:
        raise UserError(f"{where}: malformed result record ({exc})") from None
