"""The report's tables, as DataFrames of formatted strings (the HTML and Markdown writers share them).

Every function takes the results frame (report/frame.py) and returns a DataFrame, empty when the
files hold nothing for it. A figure the harness flagged as noisy ends in content.NOISY_MARK.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from xpubench.report.compare import ratio_estimate
from xpubench.report.content import NOISY_MARK
from xpubench.report.costs import peak_cell
from xpubench.report.frame import ResultSet, many_sources, ok_rows, series_label
from xpubench.report.tables import fmt, fmt_seconds
from xpubench.units import fmt_bytes, fmt_flops


def _num(row, name: str):
    value = row.get(name)
    return None if value is None or pd.isna(value) else value


def _noisy(row, text: str) -> str:
    return text + NOISY_MARK if row.get("noisy") else text


def _pct(value, *, estimate=False) -> str:
    return "n/a" if value is None or pd.isna(value) else f"{value:.1%}" + (" (est.)" if estimate else "")


def _ident(row, multi: bool) -> dict[str, str]:
    out = {"file": str(row["source"])} if multi else {}
    out.update(backend=str(row["backend"]), device=str(row["device"]), chip=str(row.get("device_name") or "n/a"),
               dtype=str(row["precision"]))
    return out


def _batch(row) -> str:
    if pd.isna(row.get("batch_size")):
        return "n/a"
    devices = int(row.get("devices") or 1)
    return f"{int(row['batch_size'])}" + (f" x{devices}" if devices > 1 else "")


def training_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = ok_rows(frame, "train")
    multi = many_sources(rows)
    out = []
    for _, r in rows.sort_values(["workload", "backend", "device", "precision", "batch_size"]).iterrows():
        out.append({
            "workload": r["workload"], **_ident(r, multi), "batch": _batch(r),
            "compile": fmt_seconds(_num(r, "compile_s")), "1st epoch": fmt_seconds(_num(r, "first_epoch_s")),
            "epoch": fmt_seconds(_num(r, "epoch_s")),
            "step (p50)": _noisy(r, fmt_seconds(_num(r, "step_s"))),
            "step IQR": fmt_seconds(_num(r, "step_iqr_s")),
            "µs/sample": fmt(_num(r, "us_per_sample"), ",.0f"),
            "samples/s": _noisy(r, fmt(_num(r, "samples_per_s"), ",.0f")),
            "achieved": fmt_flops(_num(r, "achieved_flops_per_s")),
            "MFU": peak_cell(r, "mfu"),
            "peak mem": fmt_bytes(_num(r, "peak_memory_bytes")),
            "loss": fmt(_num(r, "final_loss"), ".4f"), "val metric": fmt(_num(r, "final_metric"), ".4f"),
        })
    return pd.DataFrame(out)


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


def matmul_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = ok_rows(frame, "matmul")
    multi = many_sources(rows)
    out = []
    for _, r in rows.sort_values(["backend", "device", "precision", "size"]).iterrows():
        warm, iqr = _num(r, "warm_s"), _num(r, "warm_iqr_s")
        out.append({
            **_ident(r, multi), "N": str(int(r["size"])),
            "cold": fmt_flops(_num(r, "cold_flops_per_s")), "warm": _noisy(r, fmt_flops(_num(r, "warm_flops_per_s"))),
            "warm spread (IQR)": "n/a" if not (warm and iqr is not None) else f"±{iqr / warm / 2:.1%}",
            "cold time": fmt_seconds(_num(r, "cold_s")), "warm time": fmt_seconds(warm),
            "% of peak": peak_cell(r, "pct_of_peak"),
        })
    return pd.DataFrame(out)


def _cpu_match(frame: pd.DataFrame, r) -> pd.Series | None:
    """The same case on the CPU: the same file first, then any other file."""
    cands = ok_rows(frame)
    same = ((cands["device"] == "cpu") & (cands["workload"] == r["workload"]) & (cands["backend"] == r["backend"])
            & (cands["mode"] == r["mode"]) & (cands["precision"] == r["precision"]))
    for name in ("batch_size", "size"):
        same &= (cands[name] == r[name]).fillna(False) | (cands[name].isna() & pd.isna(r[name]))
    cands = cands[same & (cands["devices"] == 1)]
    if cands.empty:
        return None
    local = cands[cands["source"] == r["source"]]
    return (local if not local.empty else cands).iloc[0]


def speedup_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Every non-CPU case over the same case on the CPU: cold (first call / first epoch) and warm."""
    rows = ok_rows(frame)
    rows = rows[(rows["device"] != "cpu")]
    out = []
    for _, r in rows.iterrows():
        cpu = _cpu_match(frame, r)
        if cpu is None:
            continue
        if r["mode"] == "matmul":
            cold = _ratio(_num(r, "cold_flops_per_s"), _num(cpu, "cold_flops_per_s"))
            warm = _ratio(_num(r, "warm_flops_per_s"), _num(cpu, "warm_flops_per_s"))
            what = f"N={int(r['size'])}"
        else:
            cold = _ratio(_num(cpu, "first_epoch_s"), _num(r, "first_epoch_s"))
            warm = _ratio(_num(r, "samples_per_s"), _num(cpu, "samples_per_s"))
            what = f"batch {_batch(r)}"
        out.append({"workload": r["workload"], "case": f"{r['mode']} {r['precision']} {what}",
                    "backend": r["backend"], "device": f"{r['device']} ({r.get('device_name') or 'n/a'})",
                    "CPU baseline": f"{cpu['source']}: {cpu.get('device_name') or 'cpu'}",
                    "speedup cold": cold, "speedup warm": _noisy(r, warm)})
    return pd.DataFrame(out)


def _ratio(num, den) -> str:
    return "n/a" if not num or not den else f"{num / den:,.2f}x"


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


def inference_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = ok_rows(frame, "infer")
    multi = many_sources(rows)
    out = []
    for _, r in rows.sort_values(["workload", "backend", "device", "batch_size", "precision"]).iterrows():
        metric = str(r.get("metric_name") or "metric")
        value, delta = _num(r, metric) if metric in r else None, _num(r, f"{metric}_delta")
        out.append({
            "workload": r["workload"], **_ident(r, multi), "batch": _batch(r),
            "latency p50": _noisy(r, fmt_seconds(_num(r, "latency_s"))),
            "latency p90": fmt_seconds(_num(r, "latency_p90_s")),
            "samples/s": fmt(_num(r, "samples_per_s"), ",.0f"),
            "model size": fmt_bytes(_num(r, "model_bytes")),
            "size vs fp32": "n/a" if _num(r, "size_ratio") is None else f"{_num(r, 'size_ratio'):.0%}",
            metric if metric != "metric" else "quality": fmt(value, ".4f"),
            "Δ vs fp32": "n/a" if delta is None else f"{delta:+.4f}",
        })
    return pd.DataFrame(out)


def scaling_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Data-parallel cases (more than one device), against the one-device case where there is one."""
    rows = ok_rows(frame)
    out = []
    for _, r in rows[rows["devices"] > 1].sort_values(["workload", "backend", "devices"]).iterrows():
        single = rows[(rows["source"] == r["source"]) & (rows["workload"] == r["workload"])
                      & (rows["backend"] == r["backend"]) & (rows["device"] == r["device"])
                      & (rows["precision"] == r["precision"]) & (rows["mode"] == r["mode"])
                      & (rows["batch_size"] == r["batch_size"]).fillna(False) & (rows["devices"] == 1)]
        sps, one = _num(r, "samples_per_s"), (_num(single.iloc[0], "samples_per_s") if not single.empty else None)
        eff = _num(r, "scaling_efficiency")
        if eff is None and sps and one:
            eff = sps / (one * int(r["devices"]))
        out.append({"workload": r["workload"], "backend": r["backend"], "device": r["device"],
                    "devices": str(int(r["devices"])), "global batch": fmt(_num(r, "global_batch"), ",.0f"),
                    "samples/s": _noisy(r, fmt(sps, ",.0f")), "1 device samples/s": fmt(one, ",.0f"),
                    "speedup": _ratio(sps, one), "efficiency": _pct(eff)})
    return pd.DataFrame(out)


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


def status_table(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return frame
    bad = frame[frame["status"] != "ok"]
    return pd.DataFrame([{"file": r["source"], "case": r["key"], "status": r["status"],
                          "message": str(r["message"] or "")[:300]} for _, r in bad.iterrows()])
