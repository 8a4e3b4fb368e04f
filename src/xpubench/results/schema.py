"""The versioned result record: one per case, one JSON object per line of a results file.

Version history (a loader reads every version up to SCHEMA_VERSION and refuses newer ones):
  1  first version.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from xpubench.errors import UserError

SCHEMA_VERSION = 1
STATUSES = ("ok", "oom", "timeout", "crash", "error", "skipped")
FINAL_STATUSES = STATUSES  # every status is final: resume re-runs only cases with no record at all


@dataclass
class Result:
    """What one case measured (or why it could not)."""

    case: dict[str, Any]                                      # the Case that ran (plan.Case.as_dict())
    status: str                                               # one of STATUSES
    message: str = ""                                         # error text, skip reason, warnings
    metrics: dict[str, Any] = field(default_factory=dict)     # flat scalars: medians, rates, MFU...
    samples: dict[str, list[float]] = field(default_factory=dict)  # raw samples, seconds
    series: dict[str, list[float]] = field(default_factory=dict)   # per-epoch curves (loss, accuracy)
    artifacts: dict[str, Any] = field(default_factory=dict)   # small extras (misclassified test images)
    placement: str | None = None                              # the device that actually ran the work
    fingerprint: dict[str, Any] = field(default_factory=dict)  # where and with what it ran
    started_at: str = ""                                      # ISO-8601 UTC
    duration_s: float | None = None                           # wall time of the whole case
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    def to_json(self) -> str:
        """One line of strict JSON; NaN and infinities (a diverged loss) are written as null."""
        return json.dumps(finite(asdict(self)), sort_keys=True, allow_nan=False, default=_jsonable)

    @property
    def key(self) -> str:
        return self.case.get("key", "")


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
    """Bring an older record up to SCHEMA_VERSION (nothing to do yet: version 1 is the first)."""
    return record


def result_from_dict(record: Any, *, where: str) -> Result:
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
    for name, kind in (("case", dict), ("metrics", dict), ("samples", dict), ("series", dict), ("artifacts", dict)):
        if name in record and not isinstance(record[name], kind):
            raise UserError(f"{where}: malformed result record ({name} is not a JSON object)")
    if not isinstance(record.get("case"), dict):
        raise UserError(f"{where}: malformed result record (no case)")
    record = _migrate(dict(record), version)
    record["schema_version"] = SCHEMA_VERSION
    known = set(Result.__dataclass_fields__)
    try:
        return Result(**{k: v for k, v in record.items() if k in known})
    except (TypeError, ValueError) as exc:
        raise UserError(f"{where}: malformed result record ({exc})") from None
