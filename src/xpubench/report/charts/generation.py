"""Generation's charts: decode tokens/s against per-token latency through a batch sweep (the trade-off a
serving batch size picks), and a language model's tokens/s against the batch size (pp and tg); their
tables are report/tables/generation.py and report/tables/llm.py."""

from __future__ import annotations

import pandas as pd

from xpubench.report.base.content import Chart
from xpubench.report.base.frame import many_sources, measured_at, num, ok_rows, series_label, setting
from xpubench.report.charts.performance import colors, log_if_wide, new_figure, plain_log, png
from xpubench.report.tables import llm
from xpubench.report.tables.generation import GENERATE, generation_rows


def _frame_dicts(frame: pd.DataFrame) -> list[dict]:
    rows = generation_rows(frame)
    return sorted((r.to_dict() for _, r in rows.iterrows()), key=_order)


def _order(row: dict) -> tuple:
    return row["workload"], row["backend"], row["device"], row["precision"], row["batch_size"]


def throughput_latency_chart(frame: pd.DataFrame) -> Chart | None:
    """Decode tokens/s against per-token latency (p50), one line per workload / backend / device /
    precision through its batch sizes (each point labelled with its batch): the trade-off a serving
    batch size picks. The p90 latency is the right end of each point's bar."""
    made = throughput_latency_figure(frame)
    if made is None:
        return None
    fig, _, single = made
    return Chart("generation", "Throughput against latency", "Each point a batch size: decode tokens/s "
                 "(all sequences together) against the latency of one decode step; a larger batch buys "
                 "throughput with latency." + (f" Measured at one batch size only, so in the table alone: "
                                               f"{', '.join(single)}." if single else ""), png(fig))


def throughput_latency_figure(frame: pd.DataFrame):
    """(figure, axes, the series left out) of throughput_latency_chart, or None when no series has two batch
    sizes (one point per line shows no trade-off: the table holds it)."""
    rows = [r for r in _frame_dicts(frame)
            if num(r, "decode_tokens_per_s") is not None and num(r, "decode_token_p50_s") is not None]
    multi = many_sources(ok_rows(frame, GENERATE))
    for r in rows:
        r["series"] = f"{r['workload']} " + series_label(r, with_source=multi)
    swept = {s for s in (r["series"] for r in rows)
             if len({x.get("batch_size") for x in rows if x["series"] == s}) >= 2}
    single = sorted({r["series"] for r in rows} - swept)
    rows = [r for r in rows if r["series"] in swept]
    if not rows:
        return None
    palette = colors(list(dict.fromkeys(r["series"] for r in rows)))
    fig = new_figure(figsize=(8.0, 4.8))
    ax = fig.add_subplot(1, 1, 1)
    for name, color in palette.items():
        points = sorted((r for r in rows if r["series"] == name), key=measured_at)
        x = [r["decode_token_p50_s"] * 1e3 for r in points]
        y = [r["decode_tokens_per_s"] for r in points]
        p90 = [(num(r, "decode_token_p90_s") or r["decode_token_p50_s"]) * 1e3 for r in points]
        ax.plot(x, y, marker="o", color=color, label=name)
        ax.errorbar(x, y, xerr=[[0] * len(x), [max(0.0, b - a) for a, b in zip(x, p90)]], fmt="none",
                    ecolor=color, alpha=0.5, capsize=3)
        for r, xi, yi in zip(points, x, y):
            ax.annotate(setting(r, short=True), (xi, yi), textcoords="offset points", xytext=(4, 4),
                        fontsize=8)
    # a log axis only where the values span a wide range: a narrow one on a log scale has no decade in
    # view, so no tick label at all
    xlog = log_if_wide(ax, [r["decode_token_p50_s"] * 1e3 for r in rows], "x")
    ylog = log_if_wide(ax, [r["decode_tokens_per_s"] for r in rows], "y")
    ax.set_xlabel("per-token latency, p50 (ms; bar to p90)" + (", log scale" if xlog else ""))
    ax.set_ylabel("decode throughput (tokens/s)" + (", log scale" if ylog else ""))
    ax.margins(0.12)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.suptitle("Generation: throughput against latency across batch sizes")
    return fig, ax, single


def tokens_batch_chart(frame: pd.DataFrame) -> Chart | None:
    """Decode and prefill tokens/s against the batch size, one line per model and lengths (and depth) /
    backend and its variant / device / format; None unless some line has two batch sizes or more."""
    rows = llm.llm_rows(frame)
    if rows.empty:
        return None
    multi = many_sources(rows)
    series = {}
    for _, r in rows.iterrows():
        name = f"{llm.model_name(r)} {llm.lengths_text(r)} " + series_label(r, with_source=multi)   # like with like
        series.setdefault(name, []).append(r)
    if max(len(points) for points in series.values()) < 2:
        return None
    fig = new_figure(figsize=(10.0, 4.4))
    axes = fig.subplots(1, 2)
    for name, color in colors(list(series)).items():
        points = sorted(series[name], key=measured_at)
        batches = [int(r["batch_size"]) for r in points]
        for ax, metric in zip(axes, ("decode_tokens_per_s", "prefill_tokens_per_s")):
            ax.plot(batches, [num(r, metric) for r in points], marker="o", color=color, label=name)
    ticks = sorted({int(r["batch_size"]) for points in series.values() for r in points})
    for ax, what in zip(axes, ("generation (tg): decode tokens/s", "prompt processing (pp): tokens/s")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        plain_log(ax, "y")
        ax.set_xlabel("batch size (sequences together)")
        ax.set_ylabel(what + ", log scale")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=8)
    fig.suptitle("Language models: tokens/s against the batch size")
    return Chart("llm-batch", "Tokens/s against the batch size", "Decode reads every weight once per step for "
                 "the whole batch, so tg tokens/s grows with the batch until compute binds; pp is bound by "
                 "compute from the start.", png(fig))
