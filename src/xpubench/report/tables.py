"""Rich tables of results (terminal); the same rows feed the Markdown and HTML reports."""

from __future__ import annotations

from rich.table import Table


def fmt(value, spec: str = ",.1f", scale: float = 1.0, unit: str = "") -> str:
    if value is None:
        return "n/a"
    return f"{value * scale:{spec}}{unit}"


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
        pct = m.get("pct_of_peak")
        pct_s = "n/a" if pct is None else f"{pct:.0%}" + (" (est.)" if m.get("peak_is_estimate") else "")
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
        mfu = m.get("mfu")
        t.add_row(c["workload"], c["backend"], c["device"], c["precision"], batch,
                  fmt(m.get("compile_s"), ".2f"), fmt(m.get("first_epoch_s"), ".2f"), fmt(m.get("epoch_s"), ".2f"),
                  step, fmt(m.get("us_per_sample"), ",.0f"), fmt(m.get("samples_per_s"), ",.0f"),
                  fmt(m.get("achieved_flops_per_s"), ".3f", 1e-12),
                  "n/a" if mfu is None else f"{mfu:.1%}" + (" (est.)" if m.get("peak_is_estimate") else ""),
                  fmt(m.get("final_loss"), ".4f"), fmt(m.get("final_metric"), ".4f"))
    return t


def status_table(results) -> Table:
    t = Table(title="Cases that did not finish ok")
    for col in ("case", "status", "message"):
        t.add_column(col)
    for r in results:
        t.add_row(r.key, r.status, r.message)
    return t
