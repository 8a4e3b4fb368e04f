"""Serving (``xpubench serve``, docs/serving.md) in the report: one row per sweep point (latency
percentiles, tokens/s in total and per user, failures, the SLO's share and goodput, $ per million output
tokens), the latency percentiles against concurrency, the per-user against total tokens/s chart with its
Pareto front, and the answer's capacity line per server and model ("smollm-135m-q8_0 on llama.cpp ...
serves 4 concurrent users within TTFT 500 ms ... for 90% of requests")."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from xpubench.report.charts import colors, png
from xpubench.report.content import Chart
from xpubench.report.frame import many_sources, num
from xpubench.report.table_model import ALWAYS, LOW, Column, Table
from xpubench.serve.figures import capacity, capacity_line, parse_slo


def serving_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Every serve point (failed ones too: a point where no request completed still says why)."""
    if frame.empty or "mode" not in frame:
        return frame.iloc[:0]
    rows = frame[frame["mode"] == "serve"]
    if rows.empty:
        return rows
    rate = rows["request_rate"] if "request_rate" in rows else pd.Series(0.0, index=rows.index)
    return rows.assign(_rate=rate.fillna(0.0)).sort_values(["source", "workload", "device", "_rate", "batch_size"])


def _group(row, multi: bool) -> str:
    label = f"{row['workload']} {row['device']}"
    return f"{label} [{row['source']}]" if multi else label


def _ms(name: str):
    def cell(r) -> str:
        v = num(r, name)
        return "n/a" if v is None else f"{v * 1e3:,.1f}"
    return cell


def _rate(name: str, digits: int = 1):
    def cell(r) -> str:
        v = num(r, name)
        return "n/a" if v is None else f"{v:,.{digits}f}"
    return cell


def _load(r) -> str:
    rate = num(r, "request_rate")
    users = int(r["batch_size"])
    return f"Poisson {rate:g} req/s" if rate else f"{users} user{'s' if users != 1 else ''}"


def _failed(r) -> str:
    sent = num(r, "requests")
    if sent is None:
        return f"all ({str(num(r, 'message') or '')[:60]})"
    failed = int(num(r, "failed") or 0)
    timeouts = int(num(r, "timeouts") or 0)
    return f"{failed} of {int(sent)}" + (f" ({timeouts} timed out)" if timeouts else "")


def _lengths(r) -> str:
    return "/".join("n/a" if num(r, n) is None else str(int(num(r, n))) for n in ("input_len", "output_len"))


def _share(r) -> str:
    v = num(r, "slo_attained")
    return "-" if v is None else f"{v:.0%}"


def serving_table(frame: pd.DataFrame) -> Table:
    rows = serving_rows(frame)
    multi = many_sources(rows) if not rows.empty else False
    cols = [Column("setup", lambda r: _group(r, multi), priority=ALWAYS, text=True),
            Column("load", _load, priority=ALWAYS, text=True),
            Column("in/out", _lengths, "tokens", priority=2)]
    for name, what, prio in (("ttft", "TTFT", ALWAYS), ("tpot", "TPOT", ALWAYS), ("itl", "ITL", 2), ("e2e", "E2E", 1)):
        for q in ("p50", "p90", "p99"):
            cols.append(Column(f"{what} {q}", _ms(f"{name}_{q}_s"), "ms", priority=prio if q != "p99" else LOW,
                               group="latency"))
    cols += [Column("output tok/s", _rate("output_tokens_per_s"), priority=ALWAYS, group="throughput"),
             Column("total tok/s", _rate("total_tokens_per_s"), priority=2, group="throughput"),
             Column("per user tok/s", _rate("user_tokens_per_s"), priority=1, group="throughput"),
             Column("req/s", _rate("requests_per_s", 2), priority=2, group="throughput"),
             Column("failed", _failed, priority=1, group="throughput"),
             Column("SLO met", _share, priority=1, group="throughput"),
             Column("goodput", _rate("goodput_requests_per_s", 2), "req/s", priority=LOW, group="throughput"),
             Column("$ per 1M out", lambda r: "n/a" if num(r, "usd_per_1m_output_tokens") is None
                    else f"{num(r, 'usd_per_1m_output_tokens'):,.2f}", priority=LOW, group="throughput")]
    return Table("Serving sweep", cols, rows, parts={"latency": "latencies", "throughput": "throughput"},
                 note="latencies of the completed requests; tokens/s over the point's window (first send to last "
                      "end); per user = median of 1 / TPOT")


def _groups(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    rows = serving_rows(frame)
    rows = rows[rows["status"] == "ok"] if not rows.empty else rows
    if rows.empty:
        return {}
    multi = many_sources(rows)
    return {name: g for name, g in rows.groupby(rows.apply(lambda r: _group(r, multi), axis=1), sort=False)}


def latency_chart(frame: pd.DataFrame) -> Chart | None:
    """TTFT and TPOT p50 / p90 / p99 against concurrency (closed-loop points), one colour per setup."""
    groups = {k: g[g["_rate"] == 0].sort_values("batch_size") for k, g in _groups(frame).items()}
    groups = {k: g for k, g in groups.items() if len(g) >= 1}
    if not groups:
        return None
    fig = Figure(figsize=(10.0, 4.2))
    axes = fig.subplots(1, 2)
    for (name, g), color in zip(groups.items(), colors(list(groups)).values()):
        x = [int(v) for v in g["batch_size"]]
        for ax, metric in zip(axes, ("ttft", "tpot")):
            for q, style in (("p50", "-"), ("p90", "--"), ("p99", ":")):
                ax.plot(x, [(num(r, f"{metric}_{q}_s") or float("nan")) * 1e3 for _, r in g.iterrows()],
                        style, marker="o", color=color, label=f"{name} {q}")
    for ax, what in zip(axes, ("TTFT (ms)", "TPOT (ms per output token)")):
        ax.set_xscale("log", base=2)
        ticks = sorted({int(v) for g in groups.values() for v in g["batch_size"]})
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
    groups = _groups(frame)
    if not groups:
        return None
    fig = Figure(figsize=(7.5, 4.8))
    ax = fig.subplots()
    for (name, g), color in zip(groups.items(), colors(list(groups)).values()):
        pts = [(num(r, "user_tokens_per_s"), num(r, "output_tokens_per_s"), _load(r)) for _, r in g.iterrows()]
        pts = [p for p in pts if p[0] is not None and p[1] is not None]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], color=color, label=name)
        for x, y, text in pts:
            ax.annotate(text, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        front = pareto([(x, y) for x, y, _ in pts])
        ax.plot([p[0] for p in front], [p[1] for p in front], "-", color=color, alpha=0.6)
    ax.set_xlabel("output tokens/s per user (median of 1 / TPOT)")
    ax.set_ylabel("output tokens/s in total")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("Per-user against total throughput (the line: the Pareto front)")
    return Chart("serving-pareto", "Tokens/s per user against in total", "More users raise the total until the "
                 "server saturates, at each user's cost: a point on the line is one no other point beats on both.",
                 png(fig))


def answer_lines(frame: pd.DataFrame) -> list[str]:
    """Per setup with an SLO: its capacity line (serve/figures.py), with its server."""
    lines = []
    for name, g in _groups(frame).items():
        slo_text = next((s for s in g.get("slo", pd.Series(dtype=object)).dropna()), None)
        if not slo_text:
            continue
        slo = parse_slo(str(slo_text))
        points = [{"concurrency": int(r["batch_size"]), "request_rate": num(r, "request_rate"),
                   "slo_attained": num(r, "slo_attained"), "output_tokens_per_s": num(r, "output_tokens_per_s"),
                   "usd_per_1m_output_tokens": num(r, "usd_per_1m_output_tokens")} for _, r in g.iterrows()]
        server = str(num(g.iloc[0], "server") or "the server")
        for subset in ([p for p in points if not p["request_rate"]], [p for p in points if p["request_rate"]]):
            if subset:
                lines.append("Serving: " + capacity_line(capacity(subset, slo.percent), slo, len(subset),
                                                         subject=f"{name} ({server})"))
    return lines
