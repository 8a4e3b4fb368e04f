"""The report-only tables, as DataFrames of formatted strings (the HTML and Markdown writers share them):
the batch pivot, PyTorch against JAX, the spread of every figure and the processes that disagreed. The
tables the terminal shows too are defined once in report/tables.py.

Every function takes the results frame (report/frame.py) and returns a DataFrame, empty when the
files hold nothing for it. A figure the harness flagged as noisy ends in content.NOISY_MARK.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from xpubench.report.compare import ratio_estimate
from xpubench.report.frame import ResultSet, many_sources, ok_rows, series_label
from xpubench.report.tables import batch as _batch
from xpubench.report.tables import fmt, fmt_seconds
from xpubench.report.tables import noisy as _noisy
from xpubench.report.tables import num as _num
from xpubench.report.tables import pct as _pct


def batch_pivot(frame: pd.DataFrame) -> pd.DataFrame:
    """The seeds' table: epoch time and step/sample time, rows = workload x batch size, columns = device."""
    rows = ok_rows(frame, "train")
    if rows.empty:
        return pd.DataFrame()
    multi = many_sources(rows)
    cells = []
    for _, r in rows.iterrows():
        text = (f"epoch {fmt_seconds(_num(r, 'epoch_s'))} · step {fmt_seconds(_num(r, 'step_s'))} · "
                f"{fmt(_num(r, 'us_per_sample'), ',.0f')} µs/sample")
        cells.append({"workload": r["workload"], "batch": _batch(r), "order": r["batch_size"],
                      "device": series_label(r, with_source=multi), "cell": _noisy(r, text)})
    table = pd.DataFrame(cells).pivot_table(index=["workload", "order", "batch"], columns="device",
                                            values="cell", aggfunc="first")
    table = table.reset_index().drop(columns="order").fillna("-")
    table.columns.name = None
    return table


def framework_table(data: ResultSet) -> pd.DataFrame:
    """PyTorch against JAX on the same device, case by case, with the bootstrap interval of the ratio."""
    rows = ok_rows(data.frame)
    keys = ["source", "workload", "device", "mode", "precision", "batch_size", "size", "devices"]
    out = []
    for _, pair in rows[rows["backend"].isin(["torch", "jax"])].groupby(keys, dropna=False):
        if set(pair["backend"]) != {"torch", "jax"}:
            continue
        torch_row, jax_row = (pair[pair["backend"] == b].iloc[0] for b in ("torch", "jax"))
        est = ratio_estimate(data.groups(jax_row), data.groups(torch_row))
        speed = "n/a" if est is None else f"{est.ratio:.2f}x [{est.low:.2f}-{est.high:.2f}]"
        if est is None:
            verdict = "n/a"
        elif not est.significant:
            verdict = "not significant" + (f" ({est.note})" if est.note else "")
        else:
            verdict = "jax faster" if est.ratio > 1 else "torch faster"
        what = f"N={int(torch_row['size'])}" if torch_row["mode"] == "matmul" else f"batch {_batch(torch_row)}"
        out.append({"workload": torch_row["workload"], "device": torch_row["device"],
                    "case": f"{torch_row['mode']} {torch_row['precision']} {what}",
                    "torch time": _noisy(torch_row, fmt_seconds(_median(data, torch_row))),
                    "jax time": _noisy(jax_row, fmt_seconds(_median(data, jax_row))),
                    "jax speed / torch [95% CI]": speed, "verdict": verdict})
    return pd.DataFrame(out)


def _median(data: ResultSet, row):
    """The case's figure: the median of its processes' medians (the metric named like its samples)."""
    return _num(row, row["timing"]) if row.get("timing") else None


def spread_table(data: ResultSet) -> pd.DataFrame:
    """Every headline figure with its spread at both levels: the figure (median of the worker processes'
    medians), the samples' spread inside a process (median IQR / median), the processes' spread
    (range of their medians / the figure), the two-level 95% interval and the harness's warning."""
    rows = ok_rows(data.frame)
    rows = rows[rows["timing"].notna()] if not rows.empty else rows
    multi = many_sources(rows)
    out = []
    for _, r in rows.iterrows():
        groups = data.groups(r)
        within = [(np.percentile(g, 75) - np.percentile(g, 25)) / np.median(g) for g in groups if np.median(g)]
        pm = [float(np.median(g)) for g in groups]
        median = _median(data, r)
        lo, hi = _ci(r)
        out.append({**({"file": r["source"]} if multi else {}), "case": r["key"], "timing": r["timing"],
                    "processes x samples": f"{len(groups)} x {round(np.mean([g.size for g in groups]))}"
                    if groups else "0",
                    "median": fmt_seconds(median),
                    "IQR in a process": f"{np.median(within):.1%}" if within else "n/a",
                    "across processes": f"{(max(pm) - min(pm)) / median:.1%}" if len(pm) > 1 and median else "n/a",
                    "95% CI": f"{fmt_seconds(lo)} - {fmt_seconds(hi)}" if lo is not None else "n/a",
                    "flag": _noisy(r, str(_num(r, "warning") or "ok"))})
    return pd.DataFrame(out)


def disagreement_table(data: ResultSet) -> pd.DataFrame:
    """The worker processes of every case whose processes disagreed far more than their own samples
    ("bimodal", "machine state changed"), each with what the machine was doing around it."""
    rows = ok_rows(data.frame)
    if rows.empty or "process_disagreement" not in rows.columns:
        return pd.DataFrame()
    multi = many_sources(rows)
    out = []
    for _, r in rows[rows["process_disagreement"].notna()].iterrows():
        for run in data.result(r).ok_runs:
            samples = run.samples.get(r["timing"]) or []
            m = run.machine or {}
            out.append({**({"file": r["source"]} if multi else {}), "case": r["key"],
                        "disagreement": str(r["process_disagreement"]),
                        "process": f"{run.process + 1} of {run.processes}",
                        "median": fmt_seconds(float(np.median(samples)) if samples else None),
                        "load (1 min) start / end": f"{_opt(m.get('load_1m_start'))} / {_opt(m.get('load_1m_end'))}",
                        "CPU MHz start / end": f"{_opt(m.get('cpu_mhz_start'), ',.0f')} / "
                                               f"{_opt(m.get('cpu_mhz_end'), ',.0f')}",
                        "steal": _pct(m.get("steal_fraction")), "machine busy": _pct(m.get("busy_fraction"))})
    return pd.DataFrame(out)


def _opt(value, spec: str = ".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def _ci(r):
    prefix = str(r["timing"])[:-2] if r.get("timing") in ("warm_s", "step_s", "latency_s") else None
    lo, hi = (_num(r, f"{prefix}_ci95_low_s"), _num(r, f"{prefix}_ci95_high_s")) if prefix else (None, None)
    return (lo, hi) if lo is not None and hi is not None else (None, None)
