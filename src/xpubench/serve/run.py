"""``xpubench serve`` end to end: the server (started, or at a URL), the prompts, the sweep's points one
after the other (each appended to the results file as it ends), the capacity under the SLO.

Order of a sweep: the concurrency points low to high, then the rate points low to high; with
``repeat`` K the whole sweep runs K times (round i is process i of each point's case, so the results
file folds them as a case's worker processes: medians of the rounds, the two-level interval of E2E).
Prompts: a point's warm-up and measured prompts are made before its clock starts, each a different text.

What it tells as it goes (``Hooks``, printed by cli/serve.py): a warning when other processes kept the CPU
busy before the first point (as ``run`` warns), each point as it starts, each request as it ends, and each
point's figures with the time the sweep may still take: ``upper_bound_s`` from the points' time limits
(all it knows before the first point), ``about_s`` from the points measured so far.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from xpubench.backends.fingerprint import busy_note
from xpubench.errors import stop_signal
from xpubench.results import store
from xpubench.results.redact import scrubbed
from xpubench.results.schema import Run
from xpubench.serve.client import payload
from xpubench.serve.figures import Slo, capacity, capacity_line
from xpubench.serve.prompts import Prompts
from xpubench.serve.record import Target, prints_of, readable, start_snapshot, to_run
from xpubench.serve.rerun import OPEN_CAP
from xpubench.serve.sweep import Load, measure

SETUP_S = 30.0   # a set-up call (the server's description, /tokenize), or --request-timeout if shorter


@dataclass
class Settings:
    """What one ``xpubench serve`` asks (cli/serve.py reads the flags into it)."""

    output: Path
    url: str | None = None                 # without user information (cli/serve.py: the headers carry it)
    headers: dict[str, str] = field(default_factory=dict, repr=False)   # sent with every request, stored nowhere
    secrets: tuple[str, ...] = field(default=(), repr=False)          # the credentials in them (scrubbed from records)
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

    @property
    def setup_timeout_s(self) -> float:
        return min(SETUP_S, self.request_timeout_s)


def _quiet(*_) -> None:
    pass


@dataclass
class Hooks:
    """What a sweep tells as it goes (each optional)."""

    warn: Callable[[str], None] = _quiet
    point_started: Callable[[int, int, Load], None] = _quiet      # (index from 1, of, load)
    request_ended: Callable[[int, int], None] = _quiet            # (measured requests ended, of)
    point_ended: Callable[[dict, float | None], None] = _quiet     # (the point's figures, about_s left)


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
    cap = max(s.concurrency) if s.concurrency else OPEN_CAP
    out += [Load(cap, r, s.requests or max(8, round(8 * r)), 1 if s.warmup is None else s.warmup, **common)
            for r in sorted(set(s.rates))]
    return out


def upper_bound_s(points: list[Load]) -> float:
    """The longest ``points`` can take: each point's warm-up (its requests' time limit per batch) and its
    measured requests (the point's time limit, or its duration and one request's), over the rounds."""
    total = 0.0
    for load in points:
        measured = load.point_timeout_s if load.duration_s is None else min(
            load.point_timeout_s, load.duration_s + load.request_timeout_s)
        total += math.ceil(load.warmup / load.concurrency) * load.request_timeout_s + measured
    return total


def about_s(points: list[Load], last: dict) -> float | None:
    """What ``points`` should take at the output tok/s ``last`` measured (open loop: their arrivals),
    each no longer than its time limits; None before a point measured any."""
    rate, made = last.get("output_tokens_per_s"), last.get("mean_output_tokens")
    if not rate or not made:
        return None
    return sum(min(upper_bound_s([p]), p.requests / p.rate if p.rate else (p.warmup + p.requests) * made / rate)
               for p in points)


def sweep(s: Settings, target: Target, hooks: Hooks | None = None) -> Outcome:
    """Run every point (module docstring), appending each to ``s.output``; a Ctrl-C, SIGTERM or SIGHUP ends
    the sweep after recording the point it cut."""
    hooks = hooks or Hooks()
    prints = prints_of(target)
    busy = busy_note(prints.get("cpu_busy_at_start"))
    if busy:
        hooks.warn(busy)
    prompts = Prompts(target.url, s.input_len, s.seed, s.prompts, target.asked, headers=s.headers)
    url = target.url + s.endpoint
    plan = [(round_, load) for round_ in range(s.repeat) for load in loads(s)]
    rounds: list[list[dict]] = [[] for _ in range(s.repeat)]
    points, made = rounds[0], 0
    try:
        for index, (round_, load) in enumerate(plan):
            points = rounds[round_]
            hooks.point_started(index + 1, len(plan), load)
            texts = prompts.make(made, load.warmup + load.requests, s.setup_timeout_s)
            made += len(texts)
            bodies = [payload(s.endpoint, target.asked, t, s.output_len, s.ignore_eos) for t in texts]
            snap = start_snapshot()
            run = measure(url, bodies[:load.warmup], bodies[load.warmup:], load, s.headers,
                          on_request=lambda n, of=load.requests: hooks.request_ended(n, of))
            record = readable(_scrubbed(to_run(
                target, run, input_len=s.input_len, output_len=s.output_len, endpoint=s.endpoint, seed=s.seed,
                slo=s.slo, usd_per_hour=s.price, prints=prints, started=snap[2], snap=snap, process=round_,
                processes=s.repeat, length_note=prompts.length_note), s.secrets))
            store.append(s.output, record)
            points.append(record.metrics | {"status": record.status, "message": record.message})
            hooks.point_ended(points[-1], about_s([p for _, p in plan[index + 1:]], points[-1]))
            if run.interrupted:
                return Outcome(points, _line(s, rounds), interrupted=run.interrupted)
    except KeyboardInterrupt as exc:      # between points (making prompts): what was measured is in the file
        return Outcome(points, _line(s, rounds), interrupted=stop_signal(exc))
    return Outcome(points, _line(s, rounds))


def _scrubbed(record: Run, secrets: tuple[str, ...]) -> Run:
    """``record`` with the credentials sent replaced wherever the server echoed them (an error body, its
    models or metadata): kept nowhere, printed nowhere (results/redact.py)."""
    return dataclasses.replace(record, **{f.name: scrubbed(getattr(record, f.name), secrets)
                                          for f in dataclasses.fields(record)}) if secrets else record


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
