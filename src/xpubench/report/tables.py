"""Rich tables of results (terminal); the same rows feed the Markdown and HTML reports."""

from __future__ import annotations

import math

from rich.table import Table

from xpubench.report.costs import peak_cell


def fmt(value, spec: str = ",.1f", scale: float = 1.0, unit: str = "") -> str:
    if value is None:
        return "n/a"
    return f"{value * scale:{spec}}{unit}"


def fmt_seconds(seconds: float | None) -> str:
    """1.23 s, 45.6 ms, 789 µs; None -> "n/a"."""
    if seconds is None or math.isnan(seconds):
        return "n/a"
    if seconds >= 1:
        return f"{seconds:,.3g} s" if seconds < 1000 else f"{seconds:,.0f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:,.3g} ms"
    return f"{seconds * 1e6:,.3g} µs"


def cpu_baseline(results, r, metric: str):
    """The same backend, precision and size on the CPU: the seeds' 'speedup over CPU'."""
    for other in results:
        c, oc = r.case, other.case
        if (oc["device"] == "cpu" and oc["backend"] == c["backend"] and oc["precision"] == c["precision"]
                and oc.get("size") == c.get("size") and oc["mode"] == c["mode"]):
            return other.metrics.get(metric)
    return None


def matmul_table(results) -> Table:
    t = Table(title="Matrix multiply (N x N): cold = first call incl. compile, warm = steady state")
    for col in ("backend", "device", "dtype", "N", "cold GFLOP/s", "warm GFLOP/s", "warm spread",
                "% of peak", "speedup vs CPU cold / warm"):
        t.add_column(col, justify="right" if col not in ("backend", "device", "dtype") else "left")
    for r in sorted(results, key=lambda r: (r.case["backend"], r.case["device"], r.case["precision"],
                                            r.case["size"])):
        m, c = r.metrics, r.case
        spread = f"±{m['warm_iqr_s'] / m['warm_s'] / 2:.0%} IQR" + (" !" if m.get("warning") else "")
        pct_s = peak_cell(m, "pct_of_peak")
        if c["device"] == "cpu":
            speed = "-"
        else:
            cold0, warm0 = cpu_baseline(results, r, "cold_flops_per_s"), cpu_baseline(results, r, "warm_flops_per_s")
            speed = (f"{m['cold_flops_per_s'] / cold0:,.1f}x / {m['warm_flops_per_s'] / warm0:,.1f}x"
                     if cold0 and warm0 else "no CPU run")
        t.add_row(c["backend"], c["device"], c["precision"], str(c["size"]),
                  fmt(m["cold_flops_per_s"], scale=1e-9), fmt(m["warm_flops_per_s"], scale=1e-9), spread,
                  pct_s, speed)
    return t


def training_table(results) -> Table:
    t = Table(title="Training: first epoch (incl. compile) apart from steady epochs (median)")
    cols = ("workload", "backend", "device", "prec", "batch", "compile s", "1st epoch s", "epoch s",
            "step ms (p50/p90)", "µs/sample", "samples/s", "TFLOP/s", "MFU", "loss", "val")
    for col in cols:
        t.add_column(col, justify="left" if col in cols[:4] else "right")
    for r in sorted(results, key=lambda r: (r.case["workload"], r.case["backend"], r.case["device"],
                                            r.case["precision"], r.case.get("batch_size") or 0)):
        m, c = r.metrics, r.case
        batch = str(c.get("batch_size")) + (f" x{c['devices']}" if c.get("devices", 1) > 1 else "")
        step = f"{fmt(m.get('step_s'), ',.1f', 1e3)} / {fmt(m.get('step_p90_s'), ',.1f', 1e3)}"
        t.add_row(c["workload"], c["backend"], c["device"], c["precision"], batch,
                  fmt(m.get("compile_s"), ".2f"), fmt(m.get("first_epoch_s"), ".2f"), fmt(m.get("epoch_s"), ".2f"),
                  step, fmt(m.get("us_per_sample"), ",.0f"), fmt(m.get("samples_per_s"), ",.0f"),
                  fmt(m.get("achieved_flops_per_s"), ".3f", 1e-12),
                  peak_cell(m, "mfu"),
                  fmt(m.get("final_loss"), ".4f"), fmt(m.get("final_metric"), ".4f"))
    return t


def status_table(results) -> Table:
    t = Table(title="Cases that did not finish ok")
    for col in ("case", "status", "message"):
        t.add_column(col)
    for r in results:
        t.add_row(r.key, r.status, r.message)
    return t


def _fp32_sibling(results, r):
    """The fp32 inference result of the same workload, backend, device, batch size and data."""
    c = r.case
    for other in results:
        oc = other.case
        if oc["precision"] == "fp32" and oc["mode"] == "infer" and all(
                oc.get(k) == c.get(k) for k in ("workload", "backend", "device", "batch_size", "devices", "data")):
            return other
    return None


def inference_table(results) -> Table:
    """Inference side by side per precision: size, latency, throughput and quality vs fp32."""
    from xpubench.units import fmt_bytes

    t = Table(title="Inference (each row: the same trained weights; deltas vs their fp32)")
    cols = ("workload", "backend", "device", "prec", "batch", "n", "size", "compile+1st s", "ms/batch p50/p90",
            "samples/s", "x fp32", "quality", "Δ fp32")
    for col in cols:
        t.add_column(col, justify="left" if col in cols[:4] else "right",
                     no_wrap=col in ("workload", "size", "compile+1st s", "ms/batch p50/p90", "quality", "Δ fp32"))
    order = {"fp32": 0, "tf32": 1, "bf16": 2, "fp16": 3, "int8": 4}
    for r in sorted(results, key=lambda r: (r.case["workload"], r.case["backend"], r.case["device"],
                                            r.case.get("batch_size") or 0, order.get(r.case["precision"], 9))):
        m, c = r.metrics, r.case
        name = m.get("metric_name") or "metric"
        size = fmt_bytes(m.get("model_bytes"))
        if m.get("size_ratio") is not None:
            size += f" ({m['size_ratio']:.0%})"
        base = _fp32_sibling(results, r)
        speed = "-" if c["precision"] == "fp32" else "n/a"
        if base is not None and c["precision"] != "fp32" and m.get("samples_per_s") and base.metrics.get(
                "samples_per_s"):
            speed = f"{m['samples_per_s'] / base.metrics['samples_per_s']:.2f}x"
        delta = m.get(f"{name}_delta")
        if delta is None:
            vs = "-" if c["precision"] == "fp32" else "n/a"
        else:
            vs = f"{delta * 100:+.2f} pt" if name == "accuracy" else f"{delta:+.2g}"
        value = m.get(name)
        short = {"accuracy": "acc"}.get(name, name)
        shown = "n/a" if value is None else (f"{short} {value:.2%}" if name == "accuracy" else f"{short} {value:.4g}")
        lat = f"{fmt(m.get('latency_s'), ',.1f', 1e3)} / {fmt(m.get('latency_p90_s'), ',.1f', 1e3)}"
        first = fmt(m.get("first_call_s"), ".2f")
        if m.get("compile_s") is not None:
            first = f"{m['compile_s']:.2f}+{first}"
        t.add_row(c["workload"], c["backend"], c["device"], c["precision"], str(c.get("batch_size")),
                  f"{m.get('eval_samples', 0):,}", size, first, lat + (" !" if m.get("warning") else ""),
                  fmt(m.get("samples_per_s"), ",.0f"), speed, shown, vs)
    return t


def scaling_rows(results) -> list:
    """The results of every case group (workload, backend, device, mode, precision, per-device batch)
    that ran on more than one device, with their fewer-device siblings."""
    def group(r):
        return tuple(r.case.get(k) for k in ("workload", "backend", "device", "mode", "precision", "batch_size"))
    multi = {group(r) for r in results if (r.case.get("devices") or 1) > 1}
    return [r for r in results if group(r) in multi]


def scaling_table(results) -> Table:
    """Data parallel: samples/s per device count N, with speedup and efficiency against the fewest
    devices of the same case (harness/scaling.py)."""
    t = Table(title="Data parallel: throughput by device count (efficiency = speedup / (N / N0))")
    cols = ("workload", "backend", "device", "mode", "prec", "N", "batch/device", "global batch", "samples/s",
            "speedup", "efficiency")
    for col in cols:
        t.add_column(col, justify="left" if col in cols[:5] else "right")
    for r in sorted(results, key=lambda r: (r.case["workload"], r.case["backend"], r.case["device"],
                                            r.case["mode"], r.case["precision"], r.case.get("batch_size") or 0,
                                            r.case.get("devices", 1))):
        m, c = r.metrics, r.case
        n = c.get("devices", 1)
        eff = m.get("scaling_efficiency")
        base = m.get("scaling_base_devices")
        t.add_row(c["workload"], c["backend"], c["device"], c["mode"], c["precision"], str(n),
                  str(c.get("batch_size")), str(m.get("global_batch") or (c.get("batch_size") or 0) * n),
                  fmt(m.get("samples_per_s"), ",.0f"),
                  "-" if eff is None else f"{m['scaling_speedup']:.2f}x vs N={base}",
                  "-" if eff is None else f"{eff:.0%}" + (" (shared cores)" if m.get("scaling_note") else ""))
    return t
