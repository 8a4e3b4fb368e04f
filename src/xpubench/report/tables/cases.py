"""The report's tables, each defined once (report/base/table.py): training, matrix multiply, inference,
speedup over the CPU, data-parallel scaling and the cases that did not finish ok.

Every function takes the results frame (report/base/frame.py) and returns a Table (empty when the files hold
nothing for it); the terminal, Markdown and HTML render the same Table. A figure the harness flagged as
noisy ends in content.NOISY_MARK. The cases a row is read against come from report/base/related.py.
"""

from __future__ import annotations

import pandas as pd

from xpubench.devices.device import is_accelerator
from xpubench.report.base import related
from xpubench.report.base.cells import (
    batch,
    case_text,
    fmt,
    fmt_seconds,
    identity,
    noisy,
    pct,
    ratio,
    text_column,
)
from xpubench.report.base.figures import shown
from xpubench.report.base.frame import many_sources, num, ok_rows, row_mode, series_label
from xpubench.report.base.table import ALWAYS, LOW, Column, Table
from xpubench.report.tables.costs import peak_cell
from xpubench.results.metrics import unit
from xpubench.units import fmt_bytes, fmt_flops, fmt_rate


def training_table(frame: pd.DataFrame) -> Table:
    rows = ok_rows(frame, "train")
    if not rows.empty:
        rows = rows.sort_values(["workload", "backend", "device", "precision", "batch_size"])
    cols = [text_column("workload", "workload"), *identity(rows), Column("batch", batch),
            Column("compile", lambda r: fmt_seconds(num(r, "compile_s")), priority=2, group="time"),
            Column("1st epoch", lambda r: fmt_seconds(num(r, "first_epoch_s")), group="time"),
            Column("epoch", lambda r: fmt_seconds(num(r, "epoch_s")), priority=2, group="time"),
            Column("step (p50)", lambda r: noisy(r, fmt_seconds(num(r, "step_s"))), group="time"),
            Column("step IQR", lambda r: fmt_seconds(num(r, "step_iqr_s")), priority=LOW, group="time"),
            Column("µs/sample", lambda r: fmt(num(r, "us_per_sample"), ",.0f"), priority=LOW, group="use"),
            throughput_column(rows),
            Column("achieved", lambda r: fmt_flops(num(r, "achieved_flops_per_s")), priority=LOW, group="use"),
            Column("MFU", lambda r: peak_cell(r, "mfu"), priority=2,
                   group="use"),
            Column("peak mem", lambda r: fmt_bytes(num(r, "peak_memory_bytes")), priority=LOW, group="use"),
            Column("loss", lambda r: fmt(num(r, "final_loss"), ".4f"), priority=2, group="use"),
            Column("val metric", lambda r: fmt(num(r, "final_metric"), ".4f"), priority=2, group="use")]
    return Table("Every training case", cols, rows,
                 parts={"time": "Every training case: time", "use": "Every training case: use of the chip, "
                                                                  "memory and result"})


def throughput_column(rows: pd.DataFrame) -> Column:
    """Training throughput in each workload's own unit, the one every table, chart and answer uses
    (results/modes.py's headline: tok/s for a token model, samples/s for the others): "samples/s" when
    every row counts samples, else "throughput" with the unit in each cell."""
    if not ("tokens_per_s" in rows and rows["tokens_per_s"].notna().any()):
        return Column("samples/s", lambda r: noisy(r, fmt_rate(num(r, "samples_per_s"))), group="time")

    def cell(r) -> str:
        mode = row_mode(r)
        figure = mode.headline_figure(r) if mode else None
        return noisy(r, shown(figure, num(r, figure.metric)) if figure else "n/a")

    return Column("throughput", cell, group="time")


def matmul_table(frame: pd.DataFrame) -> Table:
    rows = ok_rows(frame, "matmul")
    if not rows.empty:
        rows = rows.sort_values(["backend", "device", "precision", "size"])

    def spread(r):
        warm, iqr = num(r, "warm_s"), num(r, "warm_iqr_s")
        return "n/a" if not (warm and iqr is not None) else f"±{iqr / warm / 2:.1%}"

    cols = [*identity(rows), Column("N", lambda r: str(int(r["size"]))),
            Column("cold", lambda r: fmt_flops(num(r, "cold_flops_per_s"))),
            Column("warm", lambda r: noisy(r, fmt_flops(num(r, "warm_flops_per_s")))),
            Column("warm spread (IQR)", spread, priority=2),
            Column("cold time", lambda r: fmt_seconds(num(r, "cold_s")), priority=LOW),
            Column("warm time", lambda r: fmt_seconds(num(r, "warm_s")), priority=LOW),
            Column("% of peak", lambda r: peak_cell(r, "pct_of_peak"),
                   priority=2)]
    return Table("FLOP/s per device, dtype and N", cols, rows, note=_peak_note(rows))


def _peak_note(rows: pd.DataFrame) -> str:
    """The peak's warning (a rate above the estimated CPU peak) once under the table, "" without one."""
    if "peak_warning" not in rows or rows["peak_warning"].dropna().empty:
        return ""
    warning = str(rows["peak_warning"].dropna().iloc[0])
    return f"{warning[:1].upper()}{warning[1:]}."


def _x_fp32(frame: pd.DataFrame):
    def cell(r) -> str:
        if r["precision"] == "fp32":
            return "-"
        base = related.fp32_sibling(frame, r)
        return "n/a" if base is None else ratio(num(r, "samples_per_s"), num(base, "samples_per_s"))
    return cell


def _metric_name(rows: pd.DataFrame) -> str:
    names = [str(n) for n in rows.get("metric_name", pd.Series(dtype=object)).dropna().unique()]
    return names[0] if len(names) == 1 else "quality"


def inference_table(frame: pd.DataFrame) -> Table:
    rows = ok_rows(frame, "infer")
    if not rows.empty:
        rows = rows.sort_values(["workload", "backend", "device", "batch_size", "precision"])

    def quality(r):
        metric = str(r.get("metric_name") or "metric")
        return fmt(num(r, metric) if metric in r else None, ".4f")

    def delta(r):
        value = num(r, f"{r.get('metric_name') or 'metric'}_delta")
        if value is None:
            return "-" if r["precision"] == "fp32" else "n/a"
        return f"{value:+.4f}"

    cols = [text_column("workload", "workload"), *identity(rows), Column("batch", batch),
            Column("latency p50", lambda r: noisy(r, fmt_seconds(num(r, "latency_s")))),
            Column("latency p90", lambda r: fmt_seconds(num(r, "latency_p90_s")), priority=LOW),
            Column("samples/s", lambda r: fmt_rate(num(r, "samples_per_s"))),
            Column("x fp32", _x_fp32(frame), priority=2),
            Column("model size", lambda r: fmt_bytes(num(r, "model_bytes")), priority=LOW),
            Column("size vs fp32", lambda r: "n/a" if num(r, "size_ratio") is None else f"{num(r, 'size_ratio'):.0%}",
                   priority=LOW),
            Column(_metric_name(rows), quality, priority=2), Column("Δ vs fp32", delta, priority=2)]
    return Table("Inference", cols, rows)


def speedup_table(frame: pd.DataFrame) -> Table:
    """Every non-CPU case over the same case on the CPU: cold (first call / first epoch) and warm."""
    rows = ok_rows(frame)
    if not rows.empty:
        rows = rows[rows["device"].map(is_accelerator)]
        base = {i: related.cpu_baseline(frame, r) for i, r in rows.iterrows()}
        rows = rows[[base[i] is not None for i in rows.index]]
    base_of = (lambda r: base[r.name]) if not rows.empty else None

    def faster(r, name: str | None, higher_is_better: bool) -> str:
        """The row's figure over the CPU's (a rate) or the CPU's over the row's (a time)."""
        mine, cpu = num(r, name), num(base_of(r), name)
        return ratio(mine, cpu) if higher_is_better else ratio(cpu, mine)

    def cold(r):
        mode = row_mode(r)
        name = mode.cold if mode else None
        return faster(r, name, unit(name) != "s")

    def warm(r):
        mode = row_mode(r)
        figure = mode.headline_figure(r) if mode else None
        return noisy(r, faster(r, figure.metric if figure else None, mode.higher_is_better if mode else True))

    cols = [text_column("workload", "workload"),
            Column("case", case_text, text=True),
            text_column("backend", "backend"),
            Column("device", lambda r: f"{r['device']} ({r.get('device_name') or 'n/a'})", text=True),
            Column("CPU baseline", lambda r: f"{base_of(r)['source']}: {base_of(r).get('device_name') or 'cpu'}",
                   priority=LOW, text=True),
            Column("speedup cold", cold, priority=ALWAYS), Column("speedup warm", warm, priority=ALWAYS)]
    return Table("Speedup over the CPU", cols, rows)


def scaling_table(frame: pd.DataFrame) -> Table:
    """Data-parallel cases (more than one device), against the same case on the fewest devices."""
    rows = ok_rows(frame)
    if not rows.empty:
        rows = rows[rows["devices"] > 1].sort_values(["workload", "backend", "devices"])

    def base(r):
        return related.scaling_baseline(frame, r)

    def speedup(r):
        b = base(r)
        if b is None:
            return "n/a"
        return f"{ratio(num(r, 'samples_per_s'), num(b, 'samples_per_s'))} vs N={int(b['devices'])}"

    def efficiency(r):
        eff, b, sps = num(r, "scaling_efficiency"), base(r), num(r, "samples_per_s")
        if eff is None and b is not None and sps and num(b, "samples_per_s"):
            eff = sps / (num(b, "samples_per_s") * int(r["devices"]) / int(b["devices"]))
        return pct(eff) + (" (shared cores)" if num(r, "scaling_note") else "")

    cols = [text_column("workload", "workload"), text_column("backend", "backend"), text_column("device", "device"),
            text_column("mode", "mode", priority=2), text_column("dtype", "precision", priority=2),
            Column("devices", lambda r: str(int(r["devices"]))),
            Column("global batch", lambda r: fmt(num(r, "global_batch"), ",.0f"), priority=LOW),
            Column("samples/s", lambda r: noisy(r, fmt_rate(num(r, "samples_per_s")))),
            Column("base samples/s", lambda r: fmt_rate(num(base(r), "samples_per_s")), priority=2),
            Column("speedup", speedup), Column("efficiency", efficiency)]
    return Table("Data-parallel scaling (efficiency = speedup / (N / N0))", cols, rows)


def status_table(frame: pd.DataFrame) -> Table:
    bad = frame[frame["status"] != "ok"] if not frame.empty else frame

    def message(r):
        text = str(r["message"] or "")[:300]
        if r["status"] == "oom":
            fit = related.largest_batch_that_fit(frame, r)
            if fit is not None:
                text = (text + "; " if text else "") + f"batch {fit} fitted"
        return text

    cols = [*([text_column("file", "source", priority=LOW)] if many_sources(frame) else []),
            text_column("case", "key"), text_column("status", "status"), Column("message", message, text=True)]
    return Table("Cases that did not finish ok", cols, bad)


def batch_pivot(frame: pd.DataFrame) -> pd.DataFrame:
    """The seeds' table: epoch time and step/sample time, rows = workload x batch size, columns = device."""
    rows = ok_rows(frame, "train")
    if rows.empty:
        return pd.DataFrame()
    multi = many_sources(rows)
    cells = []
    for _, r in rows.iterrows():
        text = (f"epoch {fmt_seconds(num(r, 'epoch_s'))} · step {fmt_seconds(num(r, 'step_s'))} · "
                f"{fmt(num(r, 'us_per_sample'), ',.0f')} µs/sample")
        cells.append({"workload": r["workload"], "batch": batch(r), "order": r["batch_size"],
                      "device": series_label(r, with_source=multi), "cell": noisy(r, text)})
    table = pd.DataFrame(cells).pivot_table(index=["workload", "order", "batch"], columns="device",
                                            values="cell", aggfunc="first")
    table = table.reset_index().drop(columns="order").fillna("-")
    table.columns.name = None
    return table
