"""Human-readable quantities; None (a figure the tool cannot know) is always "n/a"."""

from __future__ import annotations


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TiB"


def fmt_flops(rate: float | None) -> str:
    """FLOP/s with the unit that keeps 3-4 significant digits: 143.7 GFLOP/s, 989.4 TFLOP/s."""
    if rate is None:
        return "n/a"
    for scale, unit in ((1e15, "PFLOP/s"), (1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1e6, "MFLOP/s")):
        if rate >= scale:
            return f"{rate / scale:,.1f} {unit}"
    return f"{rate:,.0f} FLOP/s"
