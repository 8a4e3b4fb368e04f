"""What a backend hands back to the worker for one case."""

from __future__ import annotations

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
