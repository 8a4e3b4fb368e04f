"""``xpubench serve`` end to end: the server (started, or at a URL), the prompts, the sweep's points one
after the other (each appended to the results file as it ends), the capacity under the SLO.

Order of a sweep: the concurrency points low to high, then the rate points low to high; with
``repeat`` K the whole sweep runs K times (round i is process i of each point's case, so the results
file folds them as a case's worker processes: medians of the rounds, the two-level interval of E2E).
Prompts: a point's warm-up and measured prompts are made before its clock starts, each a different text.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from xpubench.errors import stop_signal
from xpubench.results import store
from xpubench.serve.client import payload
from xpubench.serve.figures import Slo, capacity, capacity_line
from xpubench.serve.prompts import Prompts
from xpubench.serve.record import Target, environment, start_snapshot, to_run
from xpubench.serve.sweep import Load, measure


@dataclass
class Settings:
    """What one ``xpubench serve`` asks (cli/serve.py reads the flags into it)."""

    output: Path
    url: str | None = None
    endpoint: str = "/v1/completions"
    concurrency: list[int] = field(default_factory=lambda: [1, 2, 4])
    rates: list[float] = field(default_factory=list)
    input_len: int = 128
    output_len: int = 128
    requests: int | None = None           # per point; default 4 x its concurrency (at least 8)
    warmup: int | None = None             # per point; default its concurrency
    duration_s: float | None = None
    request_timeout_s: float = 120.0
    point_timeout_s: float = 600.0
    slo: Slo | None = None
    price: float | None = None
    seed: int = 0
    prompts: str = "random"
    ignore_eos: bool = True
    label: str | None = None
    model_name: str | None = None          # the "model" field of each request (default: the server's first)
    repeat: int = 1


@dataclass
class Outcome:
    points: list[dict]                     # each point's metrics, in sweep order (the last round's)
    line: str | None                       # the capacity line, with an SLO
    interrupted: int | None = None          # the signal that ended the sweep early (SIGINT: Ctrl-C)


def loads(s: Settings) -> list[Load]:
    def count(c: int) -> int:
        return s.requests if s.requests is not None else max(8, 4 * c)

    common = {"duration_s": s.duration_s, "request_timeout_s": s.request_timeout_s,
              "point_timeout_s": s.point_timeout_s, "seed": s.seed}
    out = [Load(c, None, count(c), c if s.warmup is None else s.warmup, **common) for c in sorted(set(s.concurrency))]
    cap = max(s.concurrency) if s.concurrency else 64
    out += [Load(cap, r, s.requests or max(8, round(8 * r)), 1 if s.warmup is None else s.warmup, **common)
            for r in sorted(set(s.rates))]
    return out


def sweep(s: Settings, target: Target, on_point: Callable[[dict], None] | None = None) -> Outcome:
    """Run every point (module docstring), appending each to ``s.output``; a Ctrl-C, SIGTERM or SIGHUP ends
    the sweep after recording the point it cut."""
    env = environment(target)
    prompts = Prompts(target.url, s.input_len, s.seed, s.prompts, s.model_name or target.model)
    url = target.url + s.endpoint
    points: list[dict] = []
    rounds = [points]
    made = 0
    try:
        for round_ in range(s.repeat):
            if round_:
                points = []
                rounds.append(points)
            for load in loads(s):
                texts = prompts.make(made, load.warmup + load.requests)
                made += len(texts)
                bodies = [payload(s.endpoint, s.model_name or target.model, t, s.output_len, s.ignore_eos)
                          for t in texts]
                snap = start_snapshot()
                run = measure(url, bodies[:load.warmup], bodies[load.warmup:], load)
                record = to_run(target, run, input_len=s.input_len, output_len=s.output_len, endpoint=s.endpoint,
                                seed=s.seed, slo=s.slo, usd_per_hour=s.price, env=env, started=snap[2], snap=snap,
                                process=round_, processes=s.repeat, length_note=prompts.length_note)
                store.append(s.output, record)
                points.append(record.metrics | {"status": record.status, "message": record.message})
                if on_point:
                    on_point(points[-1])
                if run.interrupted:
                    return Outcome(points, _line(s, rounds), interrupted=run.interrupted)
    except KeyboardInterrupt as exc:      # between points (making prompts): what was measured is in the file
        return Outcome(points, _line(s, rounds), interrupted=stop_signal(exc))
    return Outcome(points, _line(s, rounds))


FOLDED = ("slo_attained", "output_tokens_per_s", "usd_per_1m_output_tokens")


def _line(s: Settings, rounds: list[list[dict]]) -> str | None:
    """The capacity line; with repeated rounds, of each point's median over the rounds (as the results file
    folds a case's processes)."""
    if s.slo is None:
        return None
    points = [dict(p) for p in rounds[0]]
    for i, p in enumerate(points):
        for name in FOLDED:
            values = [r[i].get(name) for r in rounds if i < len(r) and r[i].get(name) is not None]
            p[name] = statistics.median(values) if values else None
    measured = [p for p in points if p.get("concurrency")]
    closed = [p for p in measured if not p.get("request_rate")]
    rated = [p for p in measured if p.get("request_rate")]
    lines = [capacity_line(capacity(group, s.slo.percent), s.slo, len(group)) for group in (closed, rated) if group]
    return "; ".join(lines)
