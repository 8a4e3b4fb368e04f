"""Every ok result of a ranked mode (results/modes.py: matmul, training, inference) ranked against the chip
and priced, when a file is loaded (analysis.analyse calls ``annotate``; nothing here changes the file).

For each result:

* achieved FLOP/s: matmul's warm rate, models' ``achieved_flops_per_s`` (analytic FLOPs x samples/s);
* % of spec peak (``peak_label``: never a bare number above 100%, analysis/efficiency.py);
* % of the measured ceiling of the same backend, device and precision, from the run's record
  (``fingerprint["ceilings"]``, ceilings/runtime.py). The ceiling is the fastest rate *seen*: when a
  matmul result of the same file and group beats the searched ceiling beyond the two figures' noise,
  the ceiling is raised to it (harness.ceiling.raise_to_observed) and every result of that group says
  so. Within the noise the % may read slightly above 100%, labelled "(within noise)".
  A group with no recorded ceiling (the default run: nothing cached, nothing searched) is ranked against
  the fastest matmul of the same file and group instead: a *lower bound* of the ceiling
  (``ceiling_is_lower_bound``), so its % reads "≤45%" (the % of the real ceiling is at most that).
  Several accelerators: the one-device ceiling x the device count (CPU "devices" share one CPU);
* arithmetic intensity where the bytes are known (matmul: A, B and C once; models: ``bytes_per_sample``
  when a backend counted them) and the measured roofline at that intensity;
* cost (cost.py) from ``case.options["price_per_hour"]``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from xpubench.analysis.cost import result_cost
from xpubench.analysis.efficiency import efficiency, matmul_bytes, roofline_bound
from xpubench.case import Case
from xpubench.devices.device import kind_of
from xpubench.harness.ceiling import Ceiling, raise_to_observed
from xpubench.results.modes import mode_of

BYTES_PER_ELEMENT = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "int8": 1}
LOWER_BOUND = "lower bound: the fastest matmul of this file"
CEILING_MODE = "matmul"   # a ceiling is the fastest product of its group (ceilings/): this mode's results raise it


def achieved(result) -> float | None:
    """The result's achieved FLOP/s (its mode's ``flop_rate``, results/modes.py), None without one."""
    mode = mode_of(result.case.mode)
    return mode.flops(result.metrics) if mode else None


def rel_noise(result) -> float | None:
    """Half-width of the headline time's 95% interval / its median (the same relative width applies to
    the rate derived from it)."""
    mode = mode_of(result.case.mode)
    if mode is None or not mode.ranked:
        return None
    mid, low, high = mode.interval(result.metrics)
    if not (mid and low is not None and high is not None):
        return None
    return (high - low) / 2 / mid


def _scale(case: Case) -> int:
    return 1 if kind_of(case.device).shared else case.devices   # CPU "devices" share one chip


def _group(case: Case) -> str:
    return f"{case.backend}/{case.device}/{case.precision}"


def _recorded(result) -> Ceiling | None:
    data = ((result.fingerprint or {}).get("ceilings") or {}).get("ceilings", {}).get(_group(result.case))
    if not data or not data.get("flops_per_s"):
        return None
    rate, noise = data["flops_per_s"], data.get("rel_noise")
    case = result.case
    return Ceiling(backend=case.backend, device=case.device, precision=case.precision, flops_per_s=rate,
                   shape=tuple(data["shape"]) if data.get("shape") else None, best_window_flops_per_s=None, cv=None,
                   ci95_low_flops_per_s=rate * (1 - noise) if noise is not None else None,
                   ci95_high_flops_per_s=rate * (1 + noise) if noise is not None else None,
                   warning=data.get("warning"))


def _source(result) -> str:
    data = ((result.fingerprint or {}).get("ceilings") or {}).get("ceilings", {}).get(_group(result.case)) or {}
    shape = "x".join(map(str, data["shape"])) if data.get("shape") else None
    return ", ".join(p for p in (data.get("source"), f"shape {shape}" if shape else None,
                                 f"written {data['written']}" if data.get("written") else None) if p)


def group_ceilings(results: list) -> dict[str, tuple[Ceiling, str, float | None]]:
    """{group: (ceiling, where it came from, its relative noise)}: the recorded ceiling, raised to the
    fastest matmul of the same group when that one is faster beyond the noise."""
    out: dict[str, tuple[Ceiling, str, float | None]] = {}
    for r in results:
        group = _group(r.case)
        if group in out or r.status != "ok":
            continue
        ceiling = _recorded(r)
        if ceiling is not None:
            out[group] = (ceiling, _source(r), ceiling.rel_noise)
    for r in results:
        rate = achieved(r) if r.status == "ok" and r.case.mode == CEILING_MODE else None
        group = _group(r.case)
        if not rate or group not in out:
            continue
        ceiling, source, noise = out[group]
        if rate / ceiling.flops_per_s - 1 > math.hypot(*(n for n in (noise, rel_noise(r)) if n is not None)):
            label = f"the N={r.case.size} matmul case of this file"
            out[group] = (raise_to_observed(ceiling, rate, label),
                          f"raised from the searched {ceiling.flops_per_s / 1e9:,.1f} GFLOP/s ({source}) to {label}",
                          rel_noise(r))
    searched = set(out)
    for r in results:   # no recorded ceiling: the fastest matmul of the group, a lower bound of it
        rate = achieved(r) if r.status == "ok" and r.case.mode == CEILING_MODE else None
        group, case = _group(r.case), r.case
        if not rate or group in searched or (group in out and out[group][0].flops_per_s >= rate):
            continue
        n = case.size
        out[group] = (Ceiling(backend=case.backend, device=case.device, precision=case.precision,
                              flops_per_s=rate, shape=(n, n, n) if n else None, best_window_flops_per_s=None, cv=None,
                              ci95_low_flops_per_s=None, ci95_high_flops_per_s=None),
                      f"{LOWER_BOUND} (N={n})", rel_noise(r))
    return out


def _intensity_bytes(result) -> tuple[float | None, float | None]:
    """(FLOPs, bytes) per call or per sample, where the bytes are known."""
    m, case = result.metrics, result.case
    if case.mode == CEILING_MODE and case.size:
        n = case.size
        return m.get("flops_per_call"), float(matmul_bytes(n, n, n, BYTES_PER_ELEMENT.get(case.precision, 4)))
    return m.get("flops_per_sample"), m.get("bytes_per_sample")


def annotate_one(result, ceilings: dict) -> None:
    m, case = result.metrics, result.case
    mode = mode_of(case.mode)
    if mode is not None and mode.priced:
        m.update(result_cost(m, mode.name, case.options.get("price_per_hour")))
    rate = achieved(result)
    if mode is None or not mode.ranked or not rate:
        return
    found = ceilings.get(_group(case))
    scale = _scale(case)
    ceiling, source, noise = found if found else (None, None, None)
    if ceiling is not None and scale > 1:   # N accelerators: N x one device's ceiling, same relative noise
        scaled = {k: getattr(ceiling, k) for k in ("flops_per_s", "ci95_low_flops_per_s", "ci95_high_flops_per_s")}
        ceiling = Ceiling.from_dict({**ceiling.as_dict(), **{k: v * scale if v else None for k, v in scaled.items()}})
        source = f"{scale} devices x {source}"
    work, moved = _intensity_bytes(result)
    basis = ((result.fingerprint or {}).get("host", {}).get("cpu", {}).get("peak_estimate", {})
             .get(case.precision) or {})
    bound = bool(source and LOWER_BOUND in source)
    eff = efficiency(rate, peak_flops_per_s=m.get("peak_flops_per_s"), peak_is_estimate=bool(m.get("peak_is_estimate")),
                     peak_basis=basis.get("basis") if isinstance(basis, dict) else None, ceiling=ceiling,
                     ceiling_source=source, achieved_rel_noise=rel_noise(result), flops_per_call=work,
                     bytes_per_call=moved, ceiling_is_lower_bound=bound)
    bw = (((result.fingerprint or {}).get("ceilings") or {}).get("bandwidth", {})
          .get(f"{case.backend}/{case.device}") or {}).get("bytes_per_s")
    # the estimate's basis alone (a result below it) is said once per table, not per result (report/tables/costs.py)
    above_peak = eff.pct_of_peak is not None and eff.pct_of_peak > 1
    notes = [n for n in (eff.peak_note if above_peak else None, eff.ceiling_note) if n]
    if ceiling is None or bound:
        notes.append(((result.fingerprint or {}).get("ceilings") or {}).get("note")
                     or "no measured ceiling recorded with this run")
    elif found and found[1].startswith("raised"):
        notes.append(f"ceiling {found[1]}")
    m.update({k: v for k, v in {
        "ceiling_flops_per_s": eff.ceiling_flops_per_s, "pct_of_ceiling": eff.pct_of_ceiling,
        "ceiling_source": source, "ceiling_rel_noise": noise, "achieved_rel_noise": rel_noise(result),
        "ceiling_is_lower_bound": bound or None,
        "arithmetic_intensity": eff.arithmetic_intensity,
        "bytes_per_call": moved if mode.name == CEILING_MODE else None,
        "measured_bandwidth": bw, "roofline_flops_per_s": roofline_bound(eff.arithmetic_intensity,
                                                                        eff.ceiling_flops_per_s, bw),
        "peak_label": eff.peak_label, "ceiling_label": eff.ceiling_label,
        "efficiency_note": "; ".join(notes) or None}.items() if v is not None})


def annotate(results: Iterable) -> None:
    """Add the efficiency and cost figures to every ok result of one file, in place."""
    results = list(results)
    ceilings = group_ceilings(results)
    for r in results:
        if r.status == "ok":
            annotate_one(r, ceilings)
