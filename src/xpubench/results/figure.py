"""What a declared figure is: its ``Metric`` (name, unit, meaning, group), the ``figure`` field that
declares one in a group's dataclass, and ``Metrics``, the base of every group (results/metrics.py
declares them all; results/metrics_generate.py the language-model figures of generation)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

UNITS = ("s", "us", "1/s", "FLOP", "FLOP/s", "FLOP/B", "B", "B/s", "J", "W", "USD", "ratio", "count", "flag", "text")


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    meaning: str
    group: str          # the dataclass that declares it, e.g. "train"


def figure(unit: str, meaning: str, *, optional: bool = False) -> Any:
    """A declared figure: a dataclass field (default None) carrying its unit and meaning. An optional
    figure is left out of ``as_dict`` while it is None (extras that only some cases have)."""
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}")
    return field(default=None, metadata={"unit": unit, "meaning": meaning, "optional": optional})


@dataclass
class Metrics:
    """Base of every group: flat dict out, dataclass back in."""

    GROUP: ClassVar[str] = ""

    def as_dict(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and f.metadata.get("optional"):
                continue
            out[f.name] = value
        return out

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]
