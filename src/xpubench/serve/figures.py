"""A point's figures from its requests' samples, the SLO and goodput, and the capacity of a sweep.

Definitions (docs/serving.md; vLLM's ``vllm bench serve`` and AIPerf):
- TTFT: request sent -> first chunk with text; E2E: request sent -> end of its stream;
- TPOT of a request: (E2E - TTFT) / (output tokens - 1), requests with at least 2 output tokens
  (vLLM's TPOT; AIPerf's "inter token latency" is the same per-request figure);
- ITL: every gap between two consecutive chunks with text, all requests pooled (vLLM's ITL, AIPerf's
  inter-chunk latency);
- percentiles: numpy's linear interpolation over the completed requests (as both tools);
- throughput: tokens (or requests) of the completed requests / the point's window (first send -> last end)
  (vLLM's output token throughput, AIPerf's output token throughput);
- per user: 1 / TPOT, median over requests (AIPerf's output token throughput per user: the stream's
  speed once it began), and output tokens / E2E summed over the completed requests (the wait for the
  first token included: at one user, the total less the client's idle time between requests);
- goodput: requests meeting every SLO / the window (vLLM's ``--goodput``); a failed request misses it.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from xpubench.errors import UserError
from xpubench.legible.units import fmt_rate
from xpubench.results.stats import bootstrap_median_ci
from xpubench.serve.sample import Sample

SLO_KEYS = {"ttft": "ttft_s", "itl": "tpot_s", "tpot": "tpot_s", "e2e": "e2e_s"}
UNITS = {"ms": 1e-3, "s": 1.0, "us": 1e-6}
MAX_GAPS = 500_000   # raw ITL gaps a record keeps (every one is in the percentiles): ~11 MB of its 32 MiB line


@dataclass(frozen=True)
class Slo:
    """``ttft=500ms,itl=50ms,p=90``: each bound on a request's figure, met by ``percent`` of the requests.
    ``itl`` bounds a request's TPOT (its mean gap between tokens: vLLM's goodput and AIPerf's per-request
    inter-token latency), not the single longest gap."""

    bounds: tuple[tuple[str, float], ...]    # (sample name, seconds)
    percent: float = 90.0
    text: str = ""

    def met(self, s: Sample) -> bool:
        if not s.ok:
            return False
        for name, limit in self.bounds:
            value = getattr(s, name)
            if value is None and name == "tpot_s":     # a 1-token answer has no gap to bound
                continue
            if value is None or value > limit:
                return False
        return True

    def words(self) -> str:
        parts = []
        for name, limit in self.bounds:
            key = next(k for k, v in SLO_KEYS.items() if v == name and k != "tpot")
            each = f" ({_short(1 / limit)} tok/s each)" if key == "itl" else ""
            bound = f"{_short(limit)} s" if limit >= 1 else f"{_short(limit * 1e3)} ms"
            parts.append(f"{key.upper()} {bound}{each}")
        return " and ".join(parts)


def _short(value: float) -> str:
    """Three significant figures, no trailing zeros, no exponent: 50, 3.33, 0.5, 1,250."""
    value = float(f"{value:.3g}")
    return f"{value:,.0f}" if value >= 100 else f"{value:g}"


def parse_slo(text: str) -> Slo:
    """``ttft=500ms,itl=50ms,p=90`` (units ms, s, us; p a percentage, default 90); one line otherwise."""
    bounds, percent = [], 90.0
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep:
            raise UserError(f"--slo {text}: {part!r} is not KEY=VALUE (keys: ttft, itl, tpot, e2e, p)")
        if key == "p":
            try:
                percent = float(value.rstrip("%"))
            except ValueError:
                raise UserError(f"--slo {text}: p={value} is not a percentage") from None
            if not 0 < percent <= 100:
                raise UserError(f"--slo {text}: p must be above 0 and at most 100")
            continue
        if key not in SLO_KEYS:
            raise UserError(f"--slo {text}: unknown key {key!r} (keys: ttft, itl, tpot, e2e, p)")
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|us)?\s*", value)
        if not m or float(m.group(1)) <= 0:
            raise UserError(f"--slo {text}: {key}={value} is not a positive time (500ms, 0.5s)")
        bounds.append((SLO_KEYS[key], float(m.group(1)) * UNITS[m.group(2) or "ms"]))
    if not bounds:
        raise UserError(f"--slo {text}: give at least one bound, e.g. ttft=500ms,itl=50ms,p=90")
    return Slo(tuple(bounds), percent, text)


def _latency(name: str, values: list[float]) -> dict:
    if not values:
        return {f"{name}_{k}_s": None for k in ("p50", "p90", "p99", "mean")} | {f"{name}_s": None}
    p50, p90, p99 = (float(v) for v in np.percentile(values, [50, 90, 99]))
    return {f"{name}_s": p50, f"{name}_p50_s": p50, f"{name}_p90_s": p90, f"{name}_p99_s": p99,
            f"{name}_mean_s": float(np.mean(values))}


def reasons(samples: list[Sample]) -> str | None:
    """"3 x HTTP 500: boom; 1 x timed out after 5 s", most frequent first; None without failures."""
    counted = Counter(re.sub(r"\d+(\.\d+)? chunks", "N chunks", s.error) for s in samples if not s.ok)
    return "; ".join(f"{n} x {why}" for why, n in counted.most_common()) or None


def point_figures(samples: list[Sample], window_s: float | None, input_len: int, slo: Slo | None = None,
                  usd_per_hour: float | None = None) -> tuple[dict, dict]:
    """(metrics, raw samples) of one point (module docstring for each figure)."""
    ok = [s for s in samples if s.ok]
    tpots = [s.tpot_s for s in ok if s.tpot_s is not None]
    gaps = [g for s in ok for g in s.gaps]
    e2e = [s.e2e_s for s in ok]
    out_tokens = sum(s.output_tokens or 0 for s in ok)
    in_tokens = sum(s.input_tokens if s.input_tokens is not None else input_len for s in ok)
    window = window_s if window_s and window_s > 0 else None
    m: dict = {"requests": len(samples), "completed": len(ok), "failed": len(samples) - len(ok),
               "timeouts": sum(s.timed_out for s in samples), "failure_reasons": reasons(samples),
               "point_s": window}
    m |= _latency("ttft", [s.ttft_s for s in ok]) | _latency("tpot", tpots) | _latency("itl", gaps)
    m |= _latency("e2e", e2e)
    low, high = bootstrap_median_ci(np.asarray(e2e)) if e2e else (None, None)
    m |= {"e2e_ci95_low_s": low, "e2e_ci95_high_s": high}
    m["output_tokens_per_s"] = out_tokens / window if window else None
    m["total_tokens_per_s"] = (out_tokens + in_tokens) / window if window else None
    m["requests_per_s"] = len(ok) / window if window else None
    m["user_tokens_per_s"] = float(np.median([1 / t for t in tpots if t > 0])) if tpots else None
    waited = sum(e2e)
    m["user_e2e_tokens_per_s"] = out_tokens / waited if waited > 0 else None
    m["mean_input_tokens"] = in_tokens / len(ok) if ok else None
    m["mean_output_tokens"] = out_tokens / len(ok) if ok else None
    counted = {s.counted for s in ok}
    m["tokens_counted"] = ("usage field" if counted == {"usage"} else "stream chunks (no usage field)"
                           if counted == {"chunks"} else "usage field, else stream chunks" if counted else None)
    if slo is not None:
        good = [s for s in samples if slo.met(s)]
        m["slo"] = slo.text
        m["slo_attained"] = len(good) / len(samples) if samples else None
        m["goodput_requests_per_s"] = len(good) / window if window else None
        m["goodput_tokens_per_s"] = sum(s.output_tokens or 0 for s in good) / window if window else None
    if usd_per_hour is not None:
        m["usd_per_hour"] = usd_per_hour
        rate = m["output_tokens_per_s"]
        m["usd_per_1m_output_tokens"] = usd_per_hour / (rate * 3600) * 1e6 if rate else None
    step = -(-len(gaps) // MAX_GAPS) or 1
    kept = gaps[::step]
    if step > 1:   # a record is one line of at most 32 MiB (results/store.py)
        m["warning"] = f"samples.itl_s keeps 1 in {step} of the {len(gaps):,} gaps (the ITL percentiles are of all)"
    raw = {"ttft_s": [s.ttft_s for s in ok], "tpot_s": tpots, "e2e_s": e2e,
           "itl_s": [max(g, 1e-9) for g in kept]}   # two chunks parsed from one read: ~0 s apart, kept as 1 ns
    return m, {k: v for k, v in raw.items() if v}


def meets(metrics: dict, percent: float) -> bool:
    """A point meets the SLO when at least ``percent`` % of its requests did."""
    share = metrics.get("slo_attained")
    return share is not None and share * 100 >= percent - 1e-9


def capacity(points: list[dict], percent: float) -> dict | None:
    """The highest point of the sweep (by concurrency, or rate) up to which every point meets the SLO:
    the capacity; None when the lowest point already misses it."""
    key = (lambda p: (p.get("request_rate") or 0, p["concurrency"])) if any(
        p.get("request_rate") for p in points) else (lambda p: p["concurrency"])
    best = None
    for p in sorted(points, key=key):
        if not meets(p, percent):
            break
        best = p
    return best


def capacity_line(best: dict | None, slo: Slo, points: int, subject: str = "this machine") -> str:
    """"this machine serves 4 concurrent users within TTFT 500 ms and ITL 50 ms (20 tok/s each) for 90% of
    requests (at 61.2 output tok/s)", or why it serves none of the swept points."""
    if best is None:
        return (f"{subject} meets {slo.words()} for {slo.percent:g}% of requests at none of the {points} "
                "swept points (not even the lightest)")
    who = (f"{best['request_rate']:g} requests/s" if best.get("request_rate")
           else f"{best['concurrency']} concurrent user{'s' if best['concurrency'] != 1 else ''}")
    cost = (f", ${best['usd_per_1m_output_tokens']:.2f} per million output tokens"
            if best.get("usd_per_1m_output_tokens") is not None else "")
    rate = best.get("output_tokens_per_s")
    at = f" (at {fmt_rate(rate)} output tok/s in total{cost})" if rate else ""
    return f"{subject} serves {who} within {slo.words()} for {slo.percent:g}% of requests{at}"
