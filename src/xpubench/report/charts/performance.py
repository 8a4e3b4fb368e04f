"""Performance charts as PNG bytes (matplotlib, no pyplot state, no display needed).

Each function takes the results frame (report/base/frame.py) and returns a content.Chart, or None when the
files hold nothing to draw. Axes carry units; a value axis switches to a log scale when its values
span more than LOG_SPAN; error bars are 95% bootstrap intervals where the raw samples give one.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from xpubench.report.base.content import Chart
from xpubench.report.base.frame import column, many_sources, ok_rows, series_label
from xpubench.report.charts.labels import fit_x_labels

if TYPE_CHECKING:
    from matplotlib.figure import Figure

LOG_SPAN = 30.0
DPI = 110
BYTES_PER_ELEMENT = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "int8": 1}


def new_figure(**options) -> Figure:
    """A matplotlib Figure (no pyplot state). matplotlib is imported here, when a chart is drawn, not with the
    report's tables: `xpubench run` (its progress and tables) and every bad-input exit start ~1 s of CPU sooner."""
    import matplotlib
    from matplotlib.figure import Figure

    matplotlib.use("Agg", force=False)
    return Figure(**options)


def png(fig: Figure) -> bytes:
    """The figure as PNG, marked as xpubench's (outputs.CHART_SOFTWARE). Every text is plain: a ``$`` in a
    device name from a results file is a dollar sign, never matplotlib's math (nor LaTeX)."""
    from matplotlib.text import Text

    from xpubench.report.base.outputs import CHART_SOFTWARE

    for text in fig.findobj(Text):
        text.set_parse_math(False)
    buf = io.BytesIO()
    with plain_text():
        fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": CHART_SOFTWARE})
    return buf.getvalue()


def plain_text():
    """matplotlib's settings while charts are made: texts are plain (no ``$...$`` math, no LaTeX), so a
    device name or key from a results file is drawn as written. A context: the user's rcParams stay."""
    import matplotlib

    return matplotlib.rc_context({"text.parse_math": False, "text.usetex": False})


def plain_log(ax, axis: str = "y") -> None:
    """A log axis labelled 20, 50, 100 rather than 2x10^1, 5x10^1, 10^2."""
    from matplotlib.ticker import FuncFormatter

    target = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    label = FuncFormatter(lambda v, _: f"{v:,.6g}")
    target.set_major_formatter(label)
    target.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:,.6g}" if str(f"{v:.1e}")[0] in "25" else ""))


def log_if_wide(ax, values, axis: str = "y") -> bool:
    vals = np.asarray([v for v in values if v is not None and np.isfinite(v) and v > 0], dtype=float)
    wide = vals.size > 1 and vals.max() / vals.min() > LOG_SPAN
    if wide:
        plain_log(ax, axis)
    return wide


def flops_unit(max_rate: float) -> tuple[float, str]:
    for scale, unit in ((1e15, "PFLOP/s"), (1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1e6, "MFLOP/s")):
        if max_rate >= scale:
            return scale, unit
    return 1.0, "FLOP/s"


def colors(labels) -> dict[str, tuple]:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return {label: cmap(i % 10) for i, label in enumerate(dict.fromkeys(labels))}


def throughput_interval(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """95% interval of samples/s from the step-time interval (batch / step time), NaN where unknown."""
    batch = column(frame, "global_batch").fillna(column(frame, "batch"))
    low = batch / column(frame, "step_ci95_high_s")
    high = batch / column(frame, "step_ci95_low_s")
    return low.to_numpy(dtype=float), high.to_numpy(dtype=float)


def _errorbars(values: np.ndarray, low: np.ndarray, high: np.ndarray):
    """yerr for ax.bar / errorbar, or None when no interval is known."""
    if np.all(np.isnan(low)) or np.all(np.isnan(high)):
        return None
    below = np.where(np.isnan(low), 0.0, np.clip(values - low, 0, None))
    above = np.where(np.isnan(high), 0.0, np.clip(high - values, 0, None))
    return np.vstack([below, above])


def _labelled(frame: pd.DataFrame, **kw) -> pd.DataFrame:
    frame = frame.copy()
    frame["series"] = [series_label(r, with_source=many_sources(frame), **kw) for _, r in frame.iterrows()]
    return frame


def grouped_bars(ax, groups: list[str], series: list[str], value, err=None, palette=None) -> None:
    """Bars of value(group, series) (NaN = no bar), one cluster per group, one colour per series."""
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(groups))
    palette = palette or colors(series)
    for i, s in enumerate(series):
        vals = np.array([value(g, s) for g in groups], dtype=float)
        yerr = err(s, groups) if err else None
        ax.bar(x + (i - (len(series) - 1) / 2) * width, np.nan_to_num(vals, nan=0.0), width, label=s,
               color=palette[s], yerr=yerr, capsize=3, ecolor="#333")
    ax.set_xticks(x, groups)
    ax.margins(y=0.15)  # room for the legend above the tallest bar (ignored on a log axis)


def throughput_chart(frame: pd.DataFrame) -> Chart | None:
    """Training samples/s per workload, one bar per backend/device (its best batch size)."""
    made = throughput_figure(frame)
    if made is None:
        return None
    fig, _, caption = made
    return Chart("throughput", "Training throughput", caption, png(fig))


def throughput_figure(frame: pd.DataFrame):
    """(figure, its axes, caption) of throughput_chart, or None; the workload labels never overlap."""
    rows = ok_rows(frame, "train")
    rows = rows[column(rows, "samples_per_s").notna()]
    if rows.empty:
        return None
    rows = _labelled(rows)
    # each workload in its own unit, as every table says it (results/modes.py's headline): a token model
    # (gpt) in tokens/s, the others in samples/s; the interval scales with it
    per_sample = (column(rows, "tokens_per_s") / column(rows, "samples_per_s")).fillna(1.0)
    rows["sps"] = column(rows, "samples_per_s") * per_sample
    tokens = set(rows.loc[per_sample != 1.0, "workload"])
    best = rows.loc[rows.groupby(["workload", "series"])["sps"].idxmax()]
    low, high = throughput_interval(best)
    scale = (best["sps"] / column(best, "samples_per_s")).to_numpy(dtype=float)
    best = best.assign(low=low * scale, high=high * scale)
    best = best.assign(name=best["workload"],
                       workload=[f"{w} (tok/s)" if w in tokens else w for w in best["workload"]])
    groups, series = sorted(best["workload"].unique()), list(dict.fromkeys(best["series"]))
    table = {(r.workload, r.series): r for r in best.itertuples()}

    def value(g, s):
        return table[(g, s)].sps if (g, s) in table else np.nan

    def err(s, gs):
        vals = np.array([value(g, s) for g in gs])
        lo = np.array([table[(g, s)].low if (g, s) in table else np.nan for g in gs])
        hi = np.array([table[(g, s)].high if (g, s) in table else np.nan for g in gs])
        return _errorbars(vals, lo, hi)

    fig = new_figure(figsize=(max(6.5, 1.6 * len(groups) * max(1, len(series)) / 2.5), 4.2))
    ax = fig.add_subplot()
    grouped_bars(ax, groups, series, value, err)
    log = log_if_wide(ax, best["sps"])
    ax.set_ylabel("training throughput (samples/s" + ("; token models: tokens/s" if tokens else "") + ")"
                  + (", log scale" if log else ""))
    ax.set_title("Training throughput per workload and device (best batch size of each)")
    ax.legend(fontsize=8, ncols=2 if len(series) > 5 else 1)
    ax.grid(axis="y", alpha=0.3)
    fit_x_labels(fig, ax)
    batches = ", ".join(f"{r.name} {r.series}: b{int(r.batch_size)}" for r in best.itertuples()
                        if pd.notna(r.batch_size))
    return fig, ax, ("Steady-state samples/s (global batch / median step time, epochs 2+; "
                     + (f"{', '.join(sorted(tokens))}: tokens/s, samples/s x context; " if tokens else "")
                     + "bars at each "
                     "device's fastest batch size (" + batches + "); whiskers: 95% bootstrap interval of the "
                     "median step.")


def batch_chart(frame: pd.DataFrame) -> Chart | None:
    """samples/s against batch size, one line per backend/device, one panel per workload."""
    rows = ok_rows(frame, "train")
    rows = rows[column(rows, "samples_per_s").notna() & rows["batch_size"].notna()]
    counts = rows.groupby(["workload", "source", "backend", "device", "precision"])["batch_size"].nunique()
    workloads = sorted({w for (w, *_), n in counts.items() if n >= 2})
    if not workloads:
        return None
    rows = _labelled(rows[rows["workload"].isin(workloads)])
    palette = colors(rows["series"])
    fig = new_figure(figsize=(6.0 * min(len(workloads), 2), 4.0 * ((len(workloads) + 1) // 2)))
    for i, workload in enumerate(workloads):
        ax = fig.add_subplot((len(workloads) + 1) // 2, min(len(workloads), 2), i + 1)
        sub = rows[rows["workload"] == workload]
        for label, line in sub.groupby("series", sort=False):
            line = line.sort_values("batch_size")
            sps = column(line, "samples_per_s").to_numpy(dtype=float)
            low, high = throughput_interval(line)
            ax.errorbar(line["batch_size"].astype(float), sps, yerr=_errorbars(sps, low, high), marker="o",
                        capsize=3, label=label, color=palette[label])
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(sub["batch_size"].astype(int).unique()),
                      [str(b) for b in sorted(sub["batch_size"].astype(int).unique())])
        log = log_if_wide(ax, column(sub, "samples_per_s"))
        ax.set_xlabel("batch size per device (log scale)")
        ax.set_ylabel("samples/s" + (", log scale" if log else ""))
        ax.set_title(workload)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Training throughput against batch size")
    return Chart("batch_size", "Throughput against batch size", "Steady-state samples/s at each batch size; "
                 "where two lines cross, one device overtakes the other. Whiskers: 95% bootstrap interval.",
                 png(fig))


def matmul_chart(frame: pd.DataFrame) -> Chart | None:
    """Cold (first call, incl. compile) and warm (steady) FLOP/s per backend/device/dtype and N."""
    rows = ok_rows(frame, "matmul")
    if rows.empty:
        return None
    rows = _labelled(rows).sort_values(["series", "size"])
    rows["group"] = [f"{r.series}\nN={int(r.size)}" for r in rows.itertuples()]
    cold, warm = column(rows, "cold_flops_per_s"), column(rows, "warm_flops_per_s")
    scale, unit = flops_unit(float(np.nanmax(np.r_[cold, warm])))
    flops = column(rows, "flops_per_call")
    lo, hi = flops / column(rows, "warm_ci95_high_s"), flops / column(rows, "warm_ci95_low_s")
    x = np.arange(len(rows))
    fig = new_figure(figsize=(max(6.5, 0.75 * len(rows) + 2), 5.0), layout="constrained")
    ax = fig.add_subplot()
    ax.bar(x - 0.2, cold / scale, 0.4, label="cold: first call (incl. compile / library start)", color="#9db4d3")
    ax.bar(x + 0.2, warm / scale, 0.4, label="warm: steady state (median)", color="#1f5fa8",
           yerr=_errorbars(warm.to_numpy(float) / scale, lo.to_numpy(float) / scale, hi.to_numpy(float) / scale),
           capsize=3, ecolor="#333")
    if len(rows) > 8:  # many bars: one-line labels, slanted, so they never overlap
        ax.set_xticks(x, [g.replace("\n", " ") for g in rows["group"]], fontsize=8, rotation=40, ha="right",
                      rotation_mode="anchor")
    else:
        ax.set_xticks(x, rows["group"], fontsize=8)
        fit_x_labels(fig, ax)   # long series names ("torch cpu [run-a]") side by side: slanted until apart
    log = log_if_wide(ax, np.r_[cold, warm])
    ax.set_ylabel(f"{unit}" + (", log scale" if log else ""))
    fig.suptitle("Matrix multiply: cold against warm")
    fig.legend(fontsize=8, loc="outside lower center", ncols=2, frameon=False)
    ax.grid(axis="y", alpha=0.3)
    return Chart("matmul", "Matmul cold and warm", f"{unit} of N x N products (2N^3 FLOPs each). Cold is "
                 "one call; warm is the median of calibrated windows, whiskers its 95% bootstrap interval.",
                 png(fig))


def inference_chart(frame: pd.DataFrame) -> Chart | None:
    """Inference throughput and model size per precision, one bar cluster per workload/backend/device."""
    rows = ok_rows(frame, "infer")
    rows = rows[column(rows, "samples_per_s").notna()]
    if rows.empty:
        return None
    rows = _labelled(rows, with_precision=False, with_batch=True)
    rows["group"] = rows["workload"] + "\n" + rows["series"]
    groups, precisions = list(dict.fromkeys(rows["group"])), list(dict.fromkeys(rows["precision"]))
    table = {(r.group, r.precision): r for r in rows.itertuples()}
    fig = new_figure(figsize=(max(9.0, 2.2 * len(groups)), 4.2))
    for i, (metric, label, scale) in enumerate((("samples_per_s", "inference throughput (samples/s)", 1.0),
                                                 ("model_bytes", "model size (MB)", 1e6))):
        ax = fig.add_subplot(1, 2, i + 1)

        def value(g, p, metric=metric, scale=scale):
            r = table.get((g, p))
            v = getattr(r, metric, None) if r is not None else None
            return np.nan if v is None or pd.isna(v) else float(v) / scale

        grouped_bars(ax, groups, precisions, value)
        log = log_if_wide(ax, column(rows, metric) / scale)
        ax.set_ylabel(label + (", log scale" if log else ""))
        ax.tick_params(axis="x", labelsize=8)
        fit_x_labels(fig, ax)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, title="precision")
    fig.suptitle("Inference: throughput and model size per precision")
    return Chart("inference", "Inference per precision", "Samples/s of a full pass over the evaluation set "
                 "(median of passes) and the bytes of the weights as held for inference.", png(fig))


def scaling_chart(frame: pd.DataFrame) -> Chart | None:
    """Data-parallel throughput against the device count, with the ideal (linear) line from one device."""
    rows = ok_rows(frame, "train")
    rows = rows[column(rows, "samples_per_s").notna()]
    keys = ["source", "workload", "backend", "device", "precision", "batch_size"]
    groups = [g for _, g in rows.groupby(keys, dropna=False) if g["devices"].nunique() > 1]
    if not groups:
        return None
    fig = new_figure(figsize=(7.0, 4.5))
    ax = fig.add_subplot()
    palette = colors(range(len(groups)))
    for i, g in enumerate(groups):
        g = g.sort_values("devices")
        n, sps = g["devices"].astype(float).to_numpy(), column(g, "samples_per_s").to_numpy(float)
        first = g.iloc[0]
        label = f"{first['workload']} {first['backend']} {first['device']} b{first['batch_size']}/device"
        ax.plot(n, sps, "o-", color=palette[i], label=label)
        ax.plot(n, sps[0] * n / n[0], ":", color=palette[i], alpha=0.6)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("data-parallel devices (log scale)")
    ax.set_ylabel("samples/s (global)")
    ax.set_title("Data-parallel scaling (dotted: ideal, linear from the fewest devices)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return Chart("scaling", "Data-parallel scaling", "Global samples/s against the number of devices at a "
                 "fixed per-device batch; the dotted line is perfect linear scaling.", png(fig))
