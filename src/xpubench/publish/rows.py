"""One flat row per case with its figures unformatted: what `run`/`report --format csv|json|jsonl` print and
every table of the static site shows. A script reads numbers, not the terminal's text.

Columns (units in the names; None where a figure is unknown or not measured):
``source`` (the results file's label), ``host``, ``key``, the case (``workload``, ``backend``,
``device``, ``device_name``, ``mode``, ``precision``, ``batch_size``, ``size``, ``users``, ``rate``,
``devices``, ``data``),
``status`` and ``message``, ``started_at``, ``processes`` (ok worker processes) and ``samples`` (raw
samples of the headline time, all processes), the headline time ``timing`` (its samples' name),
``time_s`` (the median of the process medians) with its two-level 95% interval ``time_ci95_low_s`` /
``time_ci95_high_s``, the headline figure (``figure``: the metric's name, ``value``, ``unit``),
``flops_per_s`` (achieved) and ``peak_share`` (% of peak or MFU, a fraction), ``noisy`` (the harness
flagged the figure), ``compile_s`` (the ahead-of-time compilation each worker process paid, the median
over them; None where the case compiled nothing apart), and ``xpubench`` (the version that measured it).
"""

from __future__ import annotations

import math
from typing import Any

from xpubench.report.base.frame import Entry, device_name, entries, timing_name
from xpubench.results.modes import mode_of
from xpubench.results.plaintext import shown

COLUMNS = ("source", "host", "key", "workload", "backend", "device", "device_name", "mode", "precision",
           "batch_size", "size", "users", "rate", "devices", "data",
           "status", "message", "started_at", "processes", "samples",
           "timing", "time_s", "time_ci95_low_s", "time_ci95_high_s", "figure", "value", "unit", "flops_per_s",
           "peak_share", "noisy", "compile_s", "xpubench")


def _number(value) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def _unit(figure) -> str:
    if figure.after:
        return figure.after
    return "FLOP/s" if figure.metric.endswith("flops_per_s") else ""


def row(entry: Entry) -> dict[str, Any]:
    """The case of ``entry`` as one flat row of COLUMNS."""
    r, c, fp = entry.result, entry.result.case, entry.result.fingerprint or {}
    m = r.metrics
    mode = mode_of(c.mode)
    figure = mode.headline_figure(m) if mode and r.status == "ok" else None
    time_s, low, high = mode.interval(m) if mode and r.status == "ok" else (None, None, None)
    samples = sum(len(run.samples.get(timing_name(r) or "", []) or []) for run in r.ok_runs)
    out = {
        "source": entry.source, "host": fp.get("hostname") or (fp.get("host") or {}).get("hostname"),
        "key": r.key, **{k: getattr(c, k) for k in ("workload", "backend", "device")},
        "device_name": device_name(r),
        **{k: getattr(c, k) for k in ("mode", "precision", "batch_size", "size", "users", "rate", "devices", "data")},
        "status": r.status, "message": " ".join(str(r.message or "").split()), "started_at": r.started_at,
        "processes": len(r.ok_runs), "samples": samples, "timing": timing_name(r),
        "time_s": _number(time_s), "time_ci95_low_s": _number(low), "time_ci95_high_s": _number(high),
        "figure": figure.metric if figure else None, "value": _number(m.get(figure.metric)) if figure else None,
        "unit": _unit(figure) if figure else None,
        "flops_per_s": _number(mode.flops(m)) if mode else None,
        "peak_share": _number(m.get(mode.peak_share)) if mode and mode.peak_share else None,
        "noisy": bool(m.get("warning")) if r.status == "ok" else None,
        "compile_s": _number(m.get("compile_s")) if r.status == "ok" else None,
        "xpubench": fp.get("xpubench"),
    }
    return {k: shown(v) if isinstance(v, str) else v for k, v in out.items()}   # text from files: printable


def rows(loaded) -> list[dict[str, Any]]:
    """Every case of ``loaded`` (analysis.load output, or Results) as a row."""
    return [row(e) for e in entries(loaded)]
