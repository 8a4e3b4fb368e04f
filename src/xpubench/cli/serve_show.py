"""What ``xpubench serve`` prints as it runs (docs/serving.md, "What it prints"), from the run's hooks
(launch/hooks.py): first what it will run and the longest that can take; what the planner and the run say
(a busy machine, as ``run`` warns; the server started and ready); on a terminal, a spinner of the point
running; a line per point as it ends, with the time the sweep should still take; at the end the points'
table (each point's figures folded over its processes), the capacity line and where the results are."""

from __future__ import annotations

import math
import time
from typing import Self

from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from xpubench.launch.hooks import RunHooks
from xpubench.launch.runner import schedule
from xpubench.plan.estimate import describe
from xpubench.report.base.table import print_table
from xpubench.report.tables.serving import load_text, sweep_table
from xpubench.results.plaintext import markup
from xpubench.serve.figures import capacity, capacity_line, parse_slo
from xpubench.serve.point import load_of
from xpubench.serve.sweep import Load
from xpubench.units import fmt_rate


def upper_bound_s(points: list[Load]) -> float:
    """The longest ``points`` can take: each point's warm-up (its requests' time limit per batch) and its
    measured requests (the point's time limit, or its duration and one request's)."""
    total = 0.0
    for load in points:
        measured = load.point_timeout_s if load.duration_s is None else min(
            load.point_timeout_s, load.duration_s + load.request_timeout_s)
        total += math.ceil(load.warmup / load.concurrency) * load.request_timeout_s + measured
    return total


def about_s(points: list[Load], last: dict) -> float | None:
    """What ``points`` should take at the output tok/s ``last`` measured (open loop: their arrivals), each
    no longer than its time limits; None before a point measured any."""
    rate, made = last.get("output_tokens_per_s"), last.get("mean_output_tokens")
    if not rate or not made:
        return None
    return sum(min(upper_bound_s([p]), p.requests / p.rate if p.rate else (p.warmup + p.requests) * made / rate)
               for p in points)


def _listed(values: list, unit: str) -> str:
    return f"{', '.join(f'{v:g}' for v in values)} {unit}"


def plan_lines(cases: list, processes: int, left: int, args, out) -> list[str]:
    """What the sweep will run, and the longest it can take (before the first point, all it can know)."""
    points = [load_of(c) for c in cases]
    users = sorted({p.concurrency for p in points if p.rate is None})
    rates = sorted({p.rate for p in points if p.rate is not None})
    kinds = ([f"closed loop: {_listed(users, 'users' if users != [1] else 'user')}"] if users else []) + (
        [f"Poisson: {_listed(rates, 'requests/s')}"] if rates else [])
    asked = sorted({p.requests for p in points})
    each = f"{asked[0]:,}" if len(asked) == 1 else f"{asked[0]:,} to {asked[-1]:,}"
    rounds = f", {processes} rounds" if processes > 1 else ""
    o = cases[0].options
    if args is None:
        origin = "as planned"
    elif args.input_len or args.output_len:
        origin = "--input-len/--output-len"
    elif args.scale != "1":
        origin = f"--lengths {args.lengths} scaled by {args.scale}"
    else:
        origin = (f"--lengths {args.lengths}" + (", the default," if args.lengths == "1k/1k" else "") +
                  " unscaled: --scale 1/16 suits a small machine")
    first = points[0]
    limits = (f"--point-timeout {first.point_timeout_s:g} s per point, --request-timeout {first.request_timeout_s:g} s "
              "per warm-up request" + (f", --duration {first.duration_s:g} s" if first.duration_s else ""))
    extra = "making prompts" + ("" if o.get("url") else " and starting the server")
    count = f"{len(points)} point{'s' if len(points) > 1 else ''}{rounds}"
    what = (f"xpubench serve: {count} ({'; '.join(kinds)}), {each} measured requests each after a warm-up, "
            f"{o['input_len']:,} tokens in and {o['output_len']:,} out ({origin}) -> {out}")
    share = left / max(1, len(points) * processes)
    left_said = "" if share == 1 else f" for the {left} point process(es) it lacks"
    longest = (f"at most {describe(upper_bound_s(points) * processes * share)}{left_said} ({limits}), besides "
               f"{extra}; a line per point as it ends")
    return [what, longest]


def point_line(p: dict, index: int, of: int, took_s: float, left_s: float | None) -> str:
    head = f"  [{index}/{of}] {load_text(p)} in {describe(took_s)}"
    if p["status"] != "ok":
        return f"{head}: {p['status']}: {p.get('message')}"
    left = f"; about {describe(left_s)} left" if left_s is not None and index < of else ""
    return (f"{head}: {fmt_rate(p.get('output_tokens_per_s'))} output tok/s, "
            f"{fmt_rate(p.get('user_e2e_tokens_per_s'))} per user; TTFT p90 {_ms(p.get('ttft_p90_s'))} ms, "
            f"TPOT p90 {_ms(p.get('tpot_p90_s'))} ms; {p.get('failed', 0)} of {p.get('requests', 0)} failed{left}")


def _ms(seconds: float | None) -> str:
    return fmt_rate(None if seconds is None else seconds * 1e3)


def _point(users: int | None, rate: float | None, status: str, message: str, metrics) -> dict:
    """A point's row: its metrics, status and message, its users and rate from its case."""
    return {**metrics, "status": status, "message": message, "concurrency": users, "request_rate": rate}


class SweepShow:
    """``with SweepShow(console, out, args) as show: api.run(..., hooks=show.hooks())``; then ``ended``."""

    def __init__(self, console, out, args=None) -> None:
        self.console, self.out, self.args = console, out, args
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                 console=console, transient=True, disable=not console.is_terminal)
        self.task, self.began, self.warned = None, 0.0, set()
        self.pending: list = []       # (case, process) still to end, in the order they run
        self.index, self.of = 0, 0
        self.order: list[str] = []    # the plan's run ids, in its order
        self.seen: dict[str, dict] = {}   # run id -> the last point measured of it (an interrupted sweep's table)

    def say(self, line: str) -> None:
        self.console.print(markup(line), highlight=False)

    def warn(self, line: str) -> None:
        if line not in self.warned:      # each distinct warning once, not once per point
            self.warned.add(line)
            self.console.print(f"[yellow]warning:[/] {markup(line)}", highlight=False)

    def __enter__(self) -> Self:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def hooks(self) -> RunHooks:
        return RunHooks(on_plan=self._plan, on_start=self._start, on_result=self._result, on_warning=self.warn,
                        on_note=self.say)

    def _plan(self, cases: list, processes: int, left: int) -> None:
        self.order = [c.run_id for c in cases]
        self.pending = schedule(cases, processes)[-left:] if left else []
        self.of = left
        if cases and left:
            for line in plan_lines(cases, processes, left, self.args, self.out):
                self.say(line)

    def _start(self, case, process: int) -> None:
        self.began, self.index = time.monotonic(), self.index + 1
        if self.task is not None:
            self.progress.remove_task(self.task)
        who = load_text({"concurrency": case.users, "request_rate": case.rate})
        self.task = self.progress.add_task(markup(f"[{self.index}/{self.of}] {who}"), total=None)

    def _result(self, run) -> None:
        self.pending = [(c, p) for c, p in self.pending if (c.run_id, p) != (run.case.get("run_id"), run.process)]
        point = _point(run.case.get("users"), run.case.get("rate"), run.status, run.message, run.metrics)
        self.seen[run.case.get("run_id")] = point
        left = about_s([load_of(c) for c, _ in self.pending], point)
        self.say(point_line(point, self.index, self.of, time.monotonic() - self.began, left))
        if point.get("warning"):
            self.warn(point["warning"])

    def ended(self, results) -> None:
        """The points' table (``results``: the run's folded cases; None when it was interrupted: the points
        measured by then), the capacity line under an SLO, where the results are."""
        points = ([_point(r.case.users, r.case.rate, r.status, r.message, r.metrics) for r in results
                   if r.case.mode == "serve"]
                  if results is not None else [self.seen[i] for i in self.order if i in self.seen])
        if points:
            print_table(sweep_table(points), self.console)
        line = capacity_of(points)
        if line:
            self.say(line[:1].upper() + line[1:] + ".")
        self.say(f"results in {self.out}; `xpubench report {self.out}` shows them")


def capacity_of(points: list[dict]) -> str | None:
    """The capacity line of a sweep's points under their SLO (closed loop and open loop apart)."""
    slo_text = next((p.get("slo") for p in points if p.get("slo")), None)
    if not slo_text:
        return None
    slo = parse_slo(slo_text)
    closed = [p for p in points if p.get("concurrency") and not p.get("request_rate")]
    rated = [p for p in points if p.get("request_rate")]
    return "; ".join(capacity_line(capacity(group, slo.percent), slo, len(group)) for group in (closed, rated) if group)
