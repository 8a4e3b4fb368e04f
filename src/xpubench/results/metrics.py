"""Every figure a result can carry, declared once: its name, unit and meaning (after pyperf's metadata
info and optimum-benchmark's typed measurements). This module is the registry of the declared groups; each
group is a dataclass in a module of its own.

The measuring code fills the per-mode dataclasses (``MatmulMetrics``: results/metrics_matmul.py,
``TrainMetrics``: results/metrics_train.py, ``InferMetrics``: results/metrics_infer.py, ``GenerateMetrics``:
results/metrics_generate.py; each extends ``Common``, the figures any case may carry: results/metrics_common.py;
each mode's record in results/modes.py names its dataclass and the figures readers rank); what is added
around a measurement (peak and efficiency, data-parallel scaling, the worker processes, energy, cost, the
model's provenance: results/metrics_added.py; a failure) has a group of its own.
``REGISTRY`` maps every name to its :class:`Metric`; reports read units and meanings from it. A result's
``metrics`` stay a flat JSON object (the file format does not change): ``Metrics.as_dict()`` writes it,
and ``check(metrics)`` refuses a name nobody declared.

Units: s (seconds), us (microseconds), 1/s (per second), FLOP, FLOP/s, B (bytes), B/s, J (joules), W, USD, ratio (a
fraction: 0.42 = 42%), count, flag (true/false), text.
"""

from __future__ import annotations

import dataclasses
from typing import Any

# the base lives in metric_base.py (so that groups in modules of their own avoid an import cycle);
# re-exported here, where every caller has always found it
from xpubench.results.metric_base import UNITS, Metric, Metrics, figure  # noqa: F401
from xpubench.results.metrics_added import Cost, Efficiency, Energy, Model, Processes, Scaling
from xpubench.results.metrics_common import Common
from xpubench.results.metrics_generate import GenerateMetrics
from xpubench.results.metrics_infer import InferMetrics
from xpubench.results.metrics_matmul import MatmulMetrics
from xpubench.results.metrics_target import TimeToTarget
from xpubench.results.metrics_train import TrainMetrics

# the modes' groups (results/modes.py)
MODE_GROUPS: tuple[type[Metrics], ...] = (MatmulMetrics, TrainMetrics, InferMetrics, GenerateMetrics)
SHARED: tuple[type[Metrics], ...] = (Common, Efficiency, Scaling, Processes, Energy, Cost, Model,
                                     TimeToTarget)   # training to a quality target (metrics_target.py)
REGISTRY: dict[str, Metric] = {}


def declare(cls: type[Metrics]) -> None:
    """Add a group's figures to ``REGISTRY`` (a name declared twice keeps its first declaration; two units
    for one name are refused)."""
    for f in dataclasses.fields(cls):
        info = Metric(f.name, f.metadata["unit"], f.metadata["meaning"], cls.GROUP)
        if f.name in REGISTRY and REGISTRY[f.name].unit != info.unit:
            raise TypeError(f"metric {f.name} declared with units {REGISTRY[f.name].unit} and {info.unit}")
        REGISTRY.setdefault(f.name, info)


for _group in (*SHARED, *MODE_GROUPS):
    declare(_group)


def unit(name: str) -> str | None:
    info = REGISTRY.get(name)
    return info.unit if info else None


def unknown(metrics: dict[str, Any]) -> list[str]:
    """The names in ``metrics`` that nobody declared."""
    return [k for k in metrics if k not in REGISTRY]


def check(metrics: dict[str, Any]) -> dict[str, Any]:
    """``metrics`` unchanged when every name is declared; ValueError naming the others otherwise (the
    parent checks every worker's figures, so a misspelt name fails its case instead of vanishing)."""
    bad = unknown(metrics)
    if bad:
        raise ValueError(f"undeclared metric(s) {', '.join(sorted(bad))}: declare them in a group "
                         "(results/metrics.py lists the groups)")
    return metrics
