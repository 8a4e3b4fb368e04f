"""The answer at the end of `xpubench run`: a few lines a person acts on.

- per workload, the fastest backend and device here and by how much against the next one, with the
  95% interval of the two-level bootstrap (report/compare.py ratio_estimate: worker processes, then the
  samples inside them), or "not significant";
- which figures were noisy (processes that disagreed, or a flagged spread);
- which cases did not finish and why;
- where the results file is and the command that makes the report.
"""

from __future__ import annotations

import shlex

import numpy as np
import pandas as pd

from xpubench.report.compare import ratio_estimate
from xpubench.report.frame import ResultSet, ok_rows
from xpubench.report.summary import headline_rate
from xpubench.results.fold import process_groups

LISTED = 4  # at most this many cases named per line; the rest counted


def _name(row) -> str:
    devices = int(row.get("devices") or 1)
    parts = [str(row["backend"]), str(row["device"]) + (f" x{devices}" if devices > 1 else "")]
    if row.get("precision") != "fp32":
        parts.append(str(row["precision"]))
    return " ".join(parts)


def _setting(row) -> str:
    if row.get("mode") == "matmul" and pd.notna(row.get("size")):
        return f"N={int(row['size'])}"
    return f"batch {int(row['batch_size'])}" if pd.notna(row.get("batch_size")) else ""


def _comparable(a, b) -> bool:
    return all((pd.isna(a.get(k)) and pd.isna(b.get(k))) or a.get(k) == b.get(k)
               for k in ("batch_size", "size", "devices"))


def workload_line(data: ResultSet, rows: pd.DataFrame) -> str:
    """One workload (and mode) of one file: its fastest case against the fastest other backend/device."""
    rows = rows.assign(_rate=[headline_rate(r) for _, r in rows.iterrows()]).dropna(subset=["_rate"])
    if rows.empty:
        return ""
    rows = rows.sort_values("_rate", ascending=False)
    best = rows.iloc[0]
    what = best["workload"] if best["mode"] in ("train", "matmul") else f"{best['workload']} ({best['mode']})"
    head = f"{what}: fastest here {_name(best)}"
    others = rows[[_name(r) != _name(best) for _, r in rows.iterrows()]]
    if others.empty:
        return f"{head} (the only backend/device measured)"
    same = others[[_comparable(best, r) for _, r in others.iterrows()]]
    if same.empty:
        other = others.iloc[0]
        return (f"{head} ({_setting(best)}), {best['_rate'] / other['_rate']:.2f}x {_name(other)} "
                f"({_setting(other)}: different settings, no interval)")
    other = same.iloc[0]
    est = ratio_estimate(_groups(data, best), _groups(data, other))  # time of other / time of best
    if est is not None and est.ratio < 1:  # the samples say the other is the faster one: they decide
        best, other = other, best
        head = f"{what}: fastest here {_name(best)}"
        est = ratio_estimate(_groups(data, best), _groups(data, other))
    where = f" at {_setting(best)}" if _setting(best) else ""
    if est is None:
        return f"{head}{where}, {best['_rate'] / other['_rate']:.2f}x {_name(other)} (no raw samples: no interval)"
    if not est.significant:
        return (f"{head}{where}, but not significant against {_name(other)} "
                f"({est.ratio:.2f}x, 95% interval {est.low:.2f}-{est.high:.2f}: {est.note})")
    note = " (provisional: one process a side)" if est.provisional else ""
    return (f"{head}{where}: {est.ratio:.2f}x as fast as {_name(other)} "
            f"(95% interval {est.low:.2f}-{est.high:.2f}){note}")


def _groups(data: ResultSet, row) -> list:
    """The per-process samples the figure of the row comes from: for inference the full passes (its
    samples/s), else the headline samples."""
    result = data.result(row)
    if row.get("mode") == "infer" and result.samples.get("pass_s"):
        return [np.asarray(g, dtype=np.float64) for g in process_groups(result, "pass_s")]
    return data.groups(row)


def _listed(items: list[str]) -> str:
    more = len(items) - LISTED
    return "; ".join(items[:LISTED]) + (f"; and {more} more" if more > 0 else "")


def noisy_line(frame: pd.DataFrame) -> str:
    rows = ok_rows(frame)
    if rows.empty:
        return ""
    items = []
    for _, r in rows.iterrows():
        disagreement = r.get("process_disagreement")
        if isinstance(disagreement, str) and disagreement:
            items.append(f"{r['key']} (processes: {disagreement})")
        elif r.get("noisy"):
            items.append(f"{r['key']} ({str(r.get('warning') or 'samples vary by 10% or more').split('; ')[0]})")
    return "noisy: " + _listed(items) if items else "noisy: none flagged"


def skipped_line(frame: pd.DataFrame) -> str:
    bad = frame[frame["status"] != "ok"]
    if bad.empty:
        return ""
    items = []
    for _, r in bad.iterrows():
        why = " ".join(str(r.get("message") or "").split())
        why = why if len(why) <= 80 else why[:77] + "..."
        items.append(f"{r['key']}: {r['status']}" + (f" ({why})" if why else ""))
    return "did not finish: " + _listed(items)


def answer_lines(data: ResultSet, output=None) -> list[str]:
    """The answer as lines of plain text (see the module docstring)."""
    frame = data.frame
    lines = ["", "Answer:"]
    if not frame.empty:
        rows = ok_rows(frame)
        if not rows.empty:
            for _, group in rows.groupby(["source", "workload", "mode"], sort=True):
                line = workload_line(data, group)
                if line:
                    lines.append("- " + line)
        for line in (noisy_line(frame), skipped_line(frame)):
            if line:
                lines.append("- " + line)
    if output is not None:
        path = shlex.quote(str(output))
        lines.append(f"- results: {output}")
        lines.append("- the report (charts and every table):")
        lines.append(f"  xpubench report {path} -o report.html")
    return lines if len(lines) > 2 else []
