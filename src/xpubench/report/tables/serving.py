"""Serving (``xpubench serve``, docs/serving.md) in the report's tables: one row per sweep point (latency
percentiles, tokens/s in total and per user, failures, the SLO's share and goodput, $ per million output
tokens), the compact table ``xpubench serve`` prints as its sweep ends (``sweep_table``: every number whole,
columns dropped by importance where the terminal is narrow), and the answer's capacity line per server and
model ("smollm-135m-q8_0 on llama.cpp ... serves 4 concurrent users within TTFT 500 ms ... for 90% of
requests"). Its charts: report/charts/serving.py."""

from __future__ import annotations

import pandas as pd

from xpubench.report.base.frame import many_sources, num
from xpubench.report.base.table import ALWAYS, LOW, Column, Table
from xpubench.serve.figures import capacity, capacity_line, parse_slo
from xpubench.units import fmt_rate


def serving_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Every serve point (failed ones too: a point where no request completed still says why)."""
    if frame.empty or "mode" not in frame:
        return frame.iloc[:0]
    rows = frame[frame["mode"] == "serve"]
    if rows.empty:
        return rows
    rate = rows["request_rate"] if "request_rate" in rows else pd.Series(0.0, index=rows.index)
    return rows.assign(_rate=rate.fillna(0.0)).sort_values(["source", "workload", "device", "_rate", "users"])


def _group(row, multi: bool) -> str:
    label = f"{row['workload']} {row['device']}"
    return f"{label} [{row['source']}]" if multi else label


def _ms(*names: str):
    """The figures' cell in ms, three significant figures (whole numbers from 100): "44.5/57.2", "1,341"."""
    def cell(r) -> str:
        values = [num(r, n) for n in names]
        return "/".join(fmt_rate(v * 1e3) for v in values) if any(v is not None for v in values) else "n/a"
    return cell


def _rate(name: str):
    def cell(r) -> str:
        return fmt_rate(num(r, name))
    return cell


def load_text(r) -> str:
    rate = num(r, "request_rate")
    users = int(num(r, "users") or num(r, "concurrency"))
    return f"Poisson {rate:g} req/s" if rate else f"{users} user{'s' if users != 1 else ''}"


def _failed(r) -> str:
    sent = num(r, "requests")
    if sent is None:   # none sent: skipped (the budget, the plan) or failed before its requests
        said, which = str(num(r, "message") or ""), "none, skipped" if num(r, "status") == "skipped" else "all"
        return f"{which} ({said[:57] + '...' if len(said) > 60 else said})"
    failed, timeouts = num(r, "failed"), num(r, "timeouts")
    return (f"{'n/a' if failed is None else int(failed)} of {int(sent)}"
            + (f" ({int(timeouts)} timed out)" if timeouts else ""))


def _lengths(r) -> str:
    return "/".join("n/a" if num(r, n) is None else str(int(num(r, n))) for n in ("input_len", "output_len"))


def _share(r) -> str:
    v = num(r, "slo_attained")
    return "-" if v is None else f"{v:.0%}"


def serving_table(frame: pd.DataFrame) -> Table:
    rows = serving_rows(frame)
    multi = many_sources(rows) if not rows.empty else False
    cols = [Column("setup", lambda r: _group(r, multi), priority=ALWAYS, text=True),
            Column("load", load_text, priority=ALWAYS, text=True),
            Column("in/out", _lengths, "tokens", priority=2)]
    for name, what, prio in (("ttft", "TTFT", ALWAYS), ("tpot", "TPOT", ALWAYS), ("itl", "ITL", 2), ("e2e", "E2E", 1)):
        for q in ("p50", "p90", "p99"):
            cols.append(Column(f"{what} {q}", _ms(f"{name}_{q}_s"), "ms", priority=prio if q != "p99" else LOW,
                               group="latency"))
    cols += [Column("output tok/s", _rate("output_tokens_per_s"), priority=ALWAYS, group="throughput"),
             Column("in+out tok/s", _rate("total_tokens_per_s"), priority=2, group="throughput"),
             Column("per user tok/s", _rate("user_e2e_tokens_per_s"), priority=1, group="throughput"),
             Column("per user streaming", _rate("user_tokens_per_s"), "tok/s", priority=2, group="throughput"),
             Column("req/s", _rate("requests_per_s"), priority=2, group="throughput"),
             Column("failed", _failed, priority=1, group="throughput"),
             Column("SLO met", _share, priority=1, group="throughput"),
             Column("goodput", _rate("goodput_requests_per_s"), "req/s", priority=LOW, group="throughput"),
             Column("$ per 1M out", lambda r: "n/a" if num(r, "usd_per_1m_output_tokens") is None
                    else f"{num(r, 'usd_per_1m_output_tokens'):,.2f}", priority=LOW, group="throughput")]
    return Table("Serving sweep", cols, rows, parts={"latency": "latencies", "throughput": "throughput"},
                 note=NOTE)


NOTE = ("latencies of the completed requests; tok/s over the point's window (first send to last end); per user = "
        "a user's output tokens / the time their requests were open (the wait for the first token included: at 1 "
        "user, the total); per user streaming = median of 1 / TPOT (AIPerf's output token throughput per user)")


def sweep_table(points: list[dict]) -> Table:
    """What ``xpubench serve`` prints as its sweep ends, a row per point (its metrics, status and message):
    compact, its figures never wrapped or cut (short headers, the units in the note); on a narrow terminal
    the words wrap and E2E is dropped first."""
    rows = pd.DataFrame(points)
    cols = [Column("load", lambda r: load_text(r).removeprefix("Poisson "), priority=ALWAYS, text=True),
            Column("TTFT ms", _ms("ttft_p50_s", "ttft_p90_s"), priority=ALWAYS, whole=True),
            Column("TPOT ms", _ms("tpot_p50_s", "tpot_p90_s"), priority=ALWAYS, whole=True),
            Column("E2E s", lambda r: fmt_rate(num(r, "e2e_p50_s")), priority=2, whole=True),
            Column("tok/s", _rate("output_tokens_per_s"), priority=ALWAYS, whole=True),
            Column("per user", _rate("user_e2e_tokens_per_s"), priority=ALWAYS, whole=True),
            Column("failed", _failed, priority=ALWAYS)]
    if any(p.get("slo_attained") is not None for p in points):
        cols.append(Column("SLO met", _share, priority=ALWAYS, whole=True))
    return Table("Serving sweep", cols, rows, compact=True, note=SWEEP_NOTE)


SWEEP_NOTE = ("TTFT, TPOT: p50/p90 of the completed requests; E2E: p50; tok/s: output tokens over the point's window; "
              "per user: one user's output tok/s, the wait for the first token included (while streaming: 1000 / "
              "TPOT)")


def groups_of(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    rows = serving_rows(frame)
    rows = rows[rows["status"] == "ok"] if not rows.empty else rows
    if rows.empty:
        return {}
    multi = many_sources(rows)
    return {name: g for name, g in rows.groupby(rows.apply(lambda r: _group(r, multi), axis=1), sort=False)}



def answer_lines(frame: pd.DataFrame) -> list[str]:
    """Per setup with an SLO: its capacity line (serve/figures.py), with its server."""
    lines = []
    for name, g in groups_of(frame).items():
        slo_text = next((s for s in g.get("slo", pd.Series(dtype=object)).dropna()), None)
        if not slo_text:
            continue
        slo = parse_slo(str(slo_text))
        points = [{"concurrency": int(r["users"]), "request_rate": num(r, "request_rate"),
                   "slo_attained": num(r, "slo_attained"), "output_tokens_per_s": num(r, "output_tokens_per_s"),
                   "usd_per_1m_output_tokens": num(r, "usd_per_1m_output_tokens")} for _, r in g.iterrows()]
        server = str(num(g.iloc[0], "server") or "the server")
        for subset in ([p for p in points if not p["request_rate"]], [p for p in points if p["request_rate"]]):
            if subset:
                lines.append("Serving: " + capacity_line(capacity(subset, slo.percent), slo, len(subset),
                                                         subject=f"{name} ({server})"))
    return lines
