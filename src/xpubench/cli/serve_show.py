"""What ``xpubench serve`` prints as it runs (docs/serving.md, "What it prints"): first what it will run and
the longest that can take; a warning when other processes keep the CPU busy (as ``run`` warns); on a
terminal, a progress bar of each point's requests; a line per point as it ends, with the time the sweep
should still take; at the end the points' table, the capacity line and where the results are."""

from __future__ import annotations

import time
from typing import Self

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from xpubench.plan.estimate import describe
from xpubench.report.base.table import print_table
from xpubench.report.tables.serving import load_text, sweep_table
from xpubench.results.plaintext import markup
from xpubench.serve.run import Hooks, Outcome, Settings, loads, upper_bound_s
from xpubench.units import fmt_rate


def _listed(values: list, unit: str) -> str:
    return f"{', '.join(f'{v:g}' for v in values)} {unit}"


def plan_lines(s: Settings, args) -> list[str]:
    """What the sweep will run, and the longest it can take (before the first point, all it can know)."""
    points = loads(s)
    users = sorted({p.concurrency for p in points if p.rate is None})
    rates = sorted({p.rate for p in points if p.rate is not None})
    kinds = ([f"closed loop: {_listed(users, 'users' if users != [1] else 'user')}"] if users else []) + (
        [f"Poisson: {_listed(rates, 'requests/s')}"] if rates else [])
    asked = sorted({p.requests for p in points})
    each = f"{asked[0]:,}" if len(asked) == 1 else f"{asked[0]:,} to {asked[-1]:,}"
    rounds = f", {s.repeat} rounds" if s.repeat > 1 else ""
    if args.input_len or args.output_len:
        origin = "--input-len/--output-len"
    elif args.scale != "1":
        origin = f"--lengths {args.lengths} scaled by {args.scale}"
    else:
        origin = (f"--lengths {args.lengths}" + (", the default," if args.lengths == "1k/1k" else "") +
                  " unscaled: --scale 1/16 suits a small machine")
    limits = (f"--point-timeout {s.point_timeout_s:g} s per point, --request-timeout {s.request_timeout_s:g} s per "
              "warm-up request" + (f", --duration {s.duration_s:g} s" if s.duration_s else ""))
    extra = "making prompts and starting llama-server" if s.url is None else "making prompts"
    count = f"{len(points)} point{'s' if len(points) > 1 else ''}{rounds}"
    what = (f"xpubench serve: {count} ({'; '.join(kinds)}), {each} measured requests each after a warm-up, "
            f"{s.input_len:,} tokens in and {s.output_len:,} out ({origin}) -> {s.output}")
    longest = (f"at most {describe(upper_bound_s(points) * s.repeat)} ({limits}), besides {extra}; a line per point "
               "as it ends")
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


class SweepShow:
    """``with SweepShow(console, settings, args) as show: sweep(s, target, show.hooks())``."""

    def __init__(self, console, s: Settings, args) -> None:
        self.console, self.s, self.args = console, s, args
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=console, transient=True, disable=not console.is_terminal)
        self.task, self.began, self.at, self.warned = None, 0.0, (0, 0), set()

    def say(self, line: str) -> None:
        self.console.print(markup(line), highlight=False)

    def warn(self, line: str) -> None:
        self.console.print(f"[yellow]warning:[/] {markup(line)}", highlight=False)

    def started(self) -> None:
        for line in plan_lines(self.s, self.args):
            self.say(line)

    def __enter__(self) -> Self:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def hooks(self) -> Hooks:
        return Hooks(warn=self.warn, point_started=self._point_started, request_ended=self._request_ended,
                     point_ended=self._point_ended)

    def _point_started(self, index: int, of: int, load) -> None:
        self.began, self.at = time.monotonic(), (index, of)
        if self.task is not None:
            self.progress.remove_task(self.task)
        who = load_text({"concurrency": load.concurrency, "request_rate": load.rate})
        self.task = self.progress.add_task(markup(f"[{index}/{of}] {who}"), total=load.requests)

    def _request_ended(self, done: int, of: int) -> None:
        self.progress.update(self.task, completed=done)

    def _point_ended(self, point: dict, left_s: float | None) -> None:
        self.say(point_line(point, *self.at, time.monotonic() - self.began, left_s))
        warning = point.get("warning")
        if warning and warning not in self.warned:     # each distinct warning once, not once per point
            self.warned.add(warning)
            self.warn(warning)

    def ended(self, outcome: Outcome) -> None:
        print_table(sweep_table(outcome.points), self.console)
        if outcome.line:
            self.say(outcome.line[:1].upper() + outcome.line[1:] + ".")
        self.say(f"results appended to {self.s.output}; `xpubench report {self.s.output}` shows them")
