"""What a measuring loop hands back to the worker for one case, and what the parent rebuilds from the
worker's JSON (``Outcome.from_dict``: the status must be known and every metric declared in
results/metrics.py's registry, so a misspelt figure fails its case instead of vanishing from the reports)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Outcome:
    metrics: dict[str, Any] = field(default_factory=dict)
    samples: dict[str, list[float]] = field(default_factory=dict)
    series: dict[str, list[float]] = field(default_factory=dict)
    artifacts: dict[str, Any] = field(default_factory=dict)  # small extras: misclassified images
    placement: str | None = None
    status: str = "ok"
    message: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        """Rebuild a worker's outcome; ValueError when it is not one (unknown status, undeclared metric)."""
        from xpubench.results.metrics import check
        from xpubench.results.schema import STATUSES

        if not isinstance(data, dict):
            raise ValueError("not an object")  # noqa: TRY004 - malformed data, reported as such
        if data.get("status") not in STATUSES:
            raise ValueError(f"unknown status {data.get('status')!r}")
        for name in ("metrics", "samples", "series", "artifacts"):
            if not isinstance(data.get(name, {}), dict):
                raise ValueError(f"{name} is not an object")  # noqa: TRY004
        check(data.get("metrics") or {})
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
