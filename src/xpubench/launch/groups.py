"""The order a sweep runs its cases in (launch/runner.py): the budget's order (launch/budget.py), except that
the cases that share a server (serve points: serve/host.py ``Hosts.key``) run as one group around it, in the
plan's order (a sweep's points from its lightest load), where the first of them falls."""

from __future__ import annotations

from typing import Any

from xpubench.case import Case
from xpubench.launch.budget import Budget


def groups(cases: list[Case], budget: Budget | None, hosts) -> list[list[Case]]:
    """The cases in the order they run: the budget's order, except that the cases sharing a server are
    one group, in the plan's order (a sweep's points from its lightest load), where its first case falls."""
    ordered = budget.order(cases) if budget else cases
    if hosts is None:
        return [ordered]
    shared: dict[Any, list[Case]] = {}
    for case in cases:
        shared.setdefault(hosts.key(case), []).append(case)
    out, alone, placed = [], [], set()
    for case in ordered:
        key = hosts.key(case)
        if key is None:
            alone.append(case)
        elif key not in placed:
            placed.add(key)
            if alone:
                out.append(alone)
                alone = []
            out.append(shared[key])
    return out + ([alone] if alone else [])
