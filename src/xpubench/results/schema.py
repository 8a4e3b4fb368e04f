"""The versioned records of a results file, and the case-level result the reports read.

A line of a results file is a :class:`Run`: what ONE worker process measured for one case, as it crossed
the process boundary (its case and figures as JSON objects). A case is measured by several processes
(``--processes K``, interleaved with the other cases), so a case has up to K lines;
:func:`xpubench.results.fold.aggregate` folds them into one :class:`Result`, which is typed: its ``case`` a
``case.Case``, its ``metrics`` its mode's declared figures (results/loaded_metrics.py).

Version history (a loader reads every version up to SCHEMA_VERSION and refuses newer ones):
  1  first version: one record per case (one process).
  2  one record per worker process: ``process`` (0-based index), ``processes`` (how many the run
     planned for the case) and ``machine`` (load, clock and steal time around the process). A version 1
     record reads as process 0 of 1 with no machine state.
  3  a record reads back typed: its ``case`` is the planner's resolved case as ``Case.as_dict()`` writes
     it (``key_options`` and every field; ``key`` the key this version gives), so ``Case.from_dict`` is
     the case, and its ``metrics`` are its mode's figures. The line is what version 2 wrote; a version 1
     or 2 record, written by an older planner, is migrated once when it is loaded, to the case this
     version plans (``plan.resolve.recorded_case``: its workload's key options; a ``--weights`` case
     keyed by its model's name and digest; a backend option its backend never read left out; a
     selftest case without a batch size at batch 1), its key computed there. ``Run.schema_version``
     keeps the version a line was written with.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from xpubench.case import SERVE, Case
from xpubench.errors import UserError
from xpubench.results.loaded_metrics import LoadedMetrics, loaded_metrics
from xpubench.results.validate import Invalid, check_run

SCHEMA_VERSION = 3
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
    schema_version: int = SCHEMA_VERSION                      # the version the line was written with

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

    @property
    def mode(self) -> str | None:
        return self.case.get("mode")


@dataclass
class Result:
    """One case: its processes' runs folded together (results/fold.py), typed. With one process, every
    field is that run's own; with several, ``metrics`` hold the median over the processes that ended ok
    (the headline time's interval from both levels), ``samples`` every such process's samples in turn."""

    case: Case                                                # the case as this version plans it
    status: str
    message: str = ""
    metrics: LoadedMetrics = field(default_factory=dict)     # its mode's figures (results/loaded_metrics.py)
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
        if not isinstance(self.case, Case):   # a mapping (a notebook's, a test's): a version 3 record's case
            self.case = Case.from_dict(dict(self.case))
        if not isinstance(self.metrics, LoadedMetrics):   # a mapping of figures: its mode's, typed
            self.metrics = loaded_metrics(self.case.mode, self.metrics)

    @property
    def key(self) -> str:
        return self.case.key

    @property
    def mode(self) -> str:
        return self.case.mode

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
    """Bring an older record's fields up to SCHEMA_VERSION. Version 1 (one record per case) is process 0 of 1;
    a version 1 or 2 record's case is migrated where it is made a Case (``typed_case``), a serving point's
    users named first (they were its batch size) so that it is checked as one."""
    if version < 2:
        record.setdefault("process", 0)
        record.setdefault("processes", 1)
        record.setdefault("machine", {})
    case = record.get("case")
    if version < 3 and isinstance(case, dict) and case.get("mode") == SERVE and "users" not in case:
        record["case"] = {**case, "users": case.get("batch_size")}   # a serving point's users were its batch size
    return record


CaseReader = Callable[[dict[str, Any], int], Case]   # (a recorded case, the version its line was written with)


def typed_case(run: Run, read: CaseReader | None = None) -> Case:
    """The Case a line holds, read by ``read``, the planner's reading of a recorded case
    (``plan.resolve.recorded_case``: its workload's typed options, and a line older than version 3
    migrated; results/ is below the planner, so the loader is handed it: ``analysis.load``). Without one,
    a line of version 3 or later as written (``Case.from_dict``); an older one is refused (ValueError)."""
    if read is not None:
        return read(run.case, run.schema_version)
    if run.schema_version >= 3:
        return Case.from_dict(run.case)
    raise ValueError(f"{run.key}: a version {run.schema_version} record is migrated by the planner's reading "
                     "(plan.resolve.recorded_case): load it with analysis.load")


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
    try:
        check_run(record)
    except Invalid as exc:
        raise UserError(f"{where}: malformed result record ({exc})") from None
    known = set(Run.__dataclass_fields__)
    try:
        return Run(**{k: v for k, v in record.items() if k in known})
    except (TypeError, ValueError) as exc:
        raise UserError(f"{where}: malformed result record ({exc})") from None
