"""Serving's charts (``xpubench serve``, docs/serving.md): the latency percentiles against concurrency, and
the per-user against total tokens/s with its Pareto front. Its table: report/tables/serving.py."""

from __future__ import annotations

import pandas as pd

from xpubench.report.base.content import Chart
from xpubench.report.base.frame import num
from xpubench.report.charts.performance import colors, new_figure, png
from xpubench.report.tables.serving import groups_of, load_text


def latency_chart(frame: pd.DataFrame) -> Chart | None:
    """TTFT and TPOT p50 / p90 / p99 against concurrency (closed-loop points), one colour per setup."""
    groups = {k: g[g["_rate"] == 0].sort_values("users") for k, g in groups_of(frame).items()}
    groups = {k: g for k, g in groups.items() if len(g) >= 1}
    if not groups:
        return None
    fig = new_figure(figsize=(10.0, 4.2))
    axes = fig.subplots(1, 2)
    for (name, g), color in zip(groups.items(), colors(list(groups)).values()):
        x = [int(v) for v in g["users"]]
        for ax, metric in zip(axes, ("ttft", "tpot")):
            for q, style in (("p50", "-"), ("p90", "--"), ("p99", ":")):
                ax.plot(x, [(num(r, f"{metric}_{q}_s") or float("nan")) * 1e3 for _, r in g.iterrows()],
                        style, marker="o", color=color, label=f"{name} {q}")
    for ax, what in zip(axes, ("TTFT (ms)", "TPOT (ms per output token)")):
        ax.set_xscale("log", base=2)
        ticks = sorted({int(v) for g in groups.values() for v in g["users"]})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("concurrent users")
        ax.set_ylabel(what)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("Latency percentiles against concurrency (solid p50, dashed p90, dotted p99)")
    return Chart("serving-latency", "Latency against concurrency", "Each point a closed-loop sweep point: N users, "
                 "each sending its next request when its answer ended.", png(fig))


def pareto(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both axes (higher per-user and higher total), by per-user."""
    front = [p for p in points if not any(q[0] >= p[0] and q[1] >= p[1] and q != p for q in points)]
    return sorted(set(front))


def pareto_chart(frame: pd.DataFrame) -> Chart | None:
    """Output tokens/s per user against in total, each point labelled with its load, the front drawn."""
    groups = groups_of(frame)
    if not groups:
        return None
    fig = new_figure(figsize=(7.5, 4.8))
    ax = fig.subplots()
    for (name, g), color in zip(groups.items(), colors(list(groups)).values()):
        pts = [(num(r, "user_tokens_per_s"), num(r, "output_tokens_per_s"), load_text(r)) for _, r in g.iterrows()]
        pts = [p for p in pts if p[0] is not None and p[1] is not None]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], color=color, label=name)
        for x, y, text in pts:
            ax.annotate(text, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        front = pareto([(x, y) for x, y, _ in pts])
        ax.plot([p[0] for p in front], [p[1] for p in front], "-", color=color, alpha=0.6)
    ax.set_xlabel("output tokens/s per user while streaming (median of 1 / TPOT)")
    ax.set_ylabel("output tokens/s in total")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("Per-user against total throughput (the line: the Pareto front)")
    return Chart("serving-pareto", "Tokens/s per user against in total", "More users raise the total until the "
                 "server saturates, at each user's cost: a point on the line is one no other point beats on both.",
                 png(fig))

