"""Human-readable quantities; None (a figure the tool cannot know) is always "n/a"."""

from __future__ import annotations

import datetime as _dt
import math


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TiB"


def fmt_decimal_bytes(n: float) -> str:
    """Decimal units, as memory sizes are sold and model cards give them: 16.1 GB, 84 MB, 513 kB."""
    if n >= 1e9:
        return f"{n / 1e9:,.1f} GB"
    return f"{n / 1e6:,.0f} MB" if n >= 1e6 else f"{n / 1e3:,.0f} kB"


def fmt_flops(rate: float | None) -> str:
    """FLOP/s with the unit that keeps 3-4 significant digits: 143.7 GFLOP/s, 989.4 TFLOP/s."""
    if rate is None:
        return "n/a"
    for scale, unit in ((1e15, "PFLOP/s"), (1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1e6, "MFLOP/s")):
        if rate >= scale:
            return f"{rate / scale:,.1f} {unit}"
    return f"{rate:,.0f} FLOP/s"


def fmt_rate(rate: float | None) -> str:
    """A rate (samples/s) readable at any speed: whole numbers with separators from 100 up (12,345), three
    significant figures below (12.3, 0.412), so a slow case never reads "0"."""
    if rate is None or (isinstance(rate, float) and math.isnan(rate)):
        return "n/a"
    if rate == 0 or abs(rate) >= 99.95:
        return f"{rate:,.0f}"
    rounded = float(f"{rate:.3g}")
    return f"{rounded:.{max(0, 2 - math.floor(math.log10(abs(rounded))))}f}"


def utc_now() -> str:
    """Now, as every record and report writes a time: ISO 8601 in UTC, to the second."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
