"""The loop the overhead benchmarks share: xpubench (A) and a minimal hand-written loop (B) alternated
round by round, so both see the same drift of a noisy machine, and the ratio of their medians."""

from __future__ import annotations

import statistics
from collections.abc import Callable


def alternate(rounds: int, ours: Callable[[], float], hand: Callable[[], float]) -> dict:
    """A then B, ``rounds`` times; the medians, their ratio A / B, every round's figure and every round's
    ratio (their spread: how far one round's load moved the figure)."""
    a, b = [], []
    for _ in range(rounds):
        a.append(ours())
        b.append(hand())
    return {"xpubench": statistics.median(a), "hand": statistics.median(b),
            "ratio": statistics.median(a) / statistics.median(b), "xpubench_all": a, "hand_all": b,
            "round_ratios": [x / y for x, y in zip(a, b)]}
