"""How close a result gets to what the chip can do: % of the spec peak, % of the measured ceiling, and
the arithmetic intensity that places it on a roofline; and the labels that keep a CPU estimate honest.

The honesty rule. A CPU's "peak" is an estimate (devices/cpu_peak.py: cores x clock x FLOP/cycle). Its clock
is measured on a busy core or cpufreq's maximum, an upper bound; only without either is it the clock
the OS reports, which under a hypervisor is often the base clock, below the boost clock the cores run
at. When a result is faster than the estimate, its % of peak would read above 100%, which says the tool
is wrong. So:

* a % of peak above 100% is never printed as a number: the label reads "above est. peak" and the note
  says why (the estimate's basis, reported vs. observed clock) and gives the % of the measured ceiling,
  which is what the result is ranked by (``rank_value``);
* above a vendor (non-estimated) peak the label reads "above spec peak" and the note says something is
  wrong (the chip table, the FLOP count or the precision that really ran);
* above the measured ceiling: within the two figures' noise the % is printed with "(within noise)";
  beyond it the note says the ceiling search under-measured (``harness.ceiling.raise_to_observed``
  lifts the ceiling to the faster result).

Noise: the relative half-widths of the 95% intervals of the two medians (the ceiling's and the
result's), combined as sqrt(a^2 + b^2); unknown widths count as 0, so an unexplained excess is never
hidden.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from xpubench.harness.ceiling import Ceiling


@dataclass(frozen=True)
class Efficiency:
    achieved_flops_per_s: float | None
    peak_flops_per_s: float | None
    peak_is_estimate: bool
    pct_of_peak: float | None                 # fraction: achieved / peak (None when either is unknown)
    ceiling_flops_per_s: float | None
    pct_of_ceiling: float | None              # fraction: achieved / measured ceiling
    ceiling_source: str | None                # e.g. "measured this run", "cache"
    above_ceiling_beyond_noise: bool
    noise: float | None                       # combined relative noise used for that verdict
    arithmetic_intensity: float | None        # FLOP per byte moved (None: bytes unknown)
    peak_label: str                           # what the "% of peak" column prints
    peak_note: str | None                     # the explanation printed with it (never None above 100%)
    ceiling_label: str                        # what the "% of ceiling" column prints
    ceiling_note: str | None

    @property
    def rank_value(self) -> float | None:
        """What rankings sort by: % of the measured ceiling, else % of a peak that is not exceeded."""
        if self.pct_of_ceiling is not None:
            return self.pct_of_ceiling
        if self.pct_of_peak is not None and self.pct_of_peak <= 1.0:
            return self.pct_of_peak
        return None


def _pct(value: float) -> str:
    return f"{value:.0%}"


def _gflops(value: float) -> str:
    return f"{value / 1e9:,.1f} GFLOP/s" if value < 1e12 else f"{value / 1e12:,.1f} TFLOP/s"


def efficiency(achieved_flops_per_s: float | None, *, peak_flops_per_s: float | None, peak_is_estimate: bool = False,
               peak_basis: str | None = None, ceiling: Ceiling | None = None, ceiling_source: str | None = None,
               achieved_rel_noise: float | None = None, flops_per_call: float | None = None,
               bytes_per_call: float | None = None, ceiling_is_lower_bound: bool = False) -> Efficiency:
    """A result's efficiency figures and labels.

    ``achieved_flops_per_s``: the result's FLOP/s (matmul: warm; models: analytic FLOPs x samples/s).
    ``peak_*``: the spec peak of the same device and precision (``backends.peaks.peak_for``) and, for
    a CPU estimate, its basis string. ``ceiling``: the measured ceiling of the same backend, device and
    precision. ``achieved_rel_noise``: half-width of the result's 95% interval / its median.
    ``flops_per_call`` and ``bytes_per_call``: for the arithmetic intensity (``matmul_bytes``, XLA's
    "bytes accessed", torch's per-op count in backends/torch_/cost.py). ``ceiling_is_lower_bound``: the
    ceiling is a lower bound of the real one (the fastest matmul seen), so the % is an upper bound ("<=").
    """
    peak = peak_flops_per_s or None
    top = ceiling.flops_per_s if ceiling and ceiling.flops_per_s else None
    pct_peak = achieved_flops_per_s / peak if (achieved_flops_per_s and peak) else None
    pct_ceiling = achieved_flops_per_s / top if (achieved_flops_per_s and top) else None
    noise = None
    beyond = False
    if pct_ceiling is not None:
        noise = math.hypot(*(n for n in (ceiling.rel_noise if ceiling else None, achieved_rel_noise) if n is not None))
        beyond = pct_ceiling - 1.0 > noise
    intensity = flops_per_call / bytes_per_call if (flops_per_call and bytes_per_call) else None
    peak_label, peak_note = _peak_label(achieved_flops_per_s, peak, pct_peak, peak_is_estimate, peak_basis,
                                        pct_ceiling, top)
    ceiling_label, ceiling_note = (_bound_label(pct_ceiling, top, ceiling_source) if ceiling_is_lower_bound else
                                   _ceiling_label(pct_ceiling, top, noise, beyond, ceiling_source))
    return Efficiency(achieved_flops_per_s, peak, peak_is_estimate, pct_peak, top, pct_ceiling, ceiling_source,
                      beyond, noise, intensity, peak_label, peak_note, ceiling_label, ceiling_note)


def _peak_label(achieved, peak, pct, estimate, basis, pct_ceiling, top) -> tuple[str, str | None]:
    if pct is None:
        return "n/a", None
    if pct <= 1.0:
        if not estimate:
            return _pct(pct), None
        return f"{_pct(pct)} (est.)", f"the peak is an estimate: {basis}" if basis else "the peak is an estimate"
    ranked = (f"; ranked against the measured ceiling instead: {_pct(pct_ceiling)} of {_gflops(top)}"
              if pct_ceiling is not None else "; no measured ceiling to rank against yet")
    if estimate:
        clock = re.search(r"([\d.]+) GHz", basis or "")
        observed = (f"; at the estimate's cores and FLOP/cycle the result needs at least "
                    f"{float(clock.group(1)) * pct:.2f} GHz (observed) against the "
                    f"{float(clock.group(1)):.2f} GHz reported" if clock else "")
        return "above est. peak", (
            f"{_gflops(achieved)} is {_pct(pct)} of the estimated CPU peak of {_gflops(peak)}: the estimate "
            f"is too low, most likely because the clock it uses is below the clock the cores really ran at"
            + (f" ({basis})" if basis else "") + observed + ranked)
    return "above spec peak", (
        f"{_gflops(achieved)} is {_pct(pct)} of the vendor peak of {_gflops(peak)}: impossible on this chip, so "
        f"the chip table, the FLOP count or the precision that really ran is wrong" + ranked)


def _ceiling_label(pct, top, noise, beyond, source) -> tuple[str, str | None]:
    if pct is None:
        return "n/a", None
    where = f" ({source})" if source else ""
    if pct <= 1.0:
        return _pct(pct), None
    if not beyond:
        return f"{_pct(pct)} (within noise)", (
            f"{_pct(pct - 1)} above the measured ceiling of {_gflops(top)}{where}, within the measurements' "
            f"noise of +-{_pct(noise)}")
    return f"{_pct(pct)} (above ceiling)", (
        f"{_pct(pct - 1)} above the measured ceiling of {_gflops(top)}{where}, beyond the noise of "
        f"+-{_pct(noise)}: the ceiling search under-measured; a longer search (or the ceiling raised to this "
        f"result) fixes it")


def _bound_label(pct, top, source) -> tuple[str, str | None]:
    """Against a lower bound of the ceiling: the real % is at most this one."""
    if pct is None:
        return "n/a", None
    if pct <= 1.0:
        return f"≤{_pct(pct)}", None
    return "above the bound", (f"faster than {_gflops(top)}, a lower bound of the ceiling ({source}): the real "
                               "ceiling is higher")


def matmul_bytes(m: int, k: int, n: int, element_bytes: int) -> int:
    """The least a matmul moves: read A (m x k) and B (k x n) once, write C (m x n) once."""
    return (m * k + k * n + m * n) * element_bytes


def roofline_bound(intensity: float | None, ceiling_flops_per_s: float | None,
                   bytes_per_s: float | None) -> float | None:
    """The measured roofline at this arithmetic intensity: min(ceiling, intensity x bandwidth)."""
    if not (intensity and ceiling_flops_per_s and bytes_per_s):
        return None
    return min(ceiling_flops_per_s, intensity * bytes_per_s)
