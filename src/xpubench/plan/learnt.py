"""A case's time learnt from what it, or cases like it, took on this machine before (launch/history.py), the
model's (plan/estimate.py) where nothing was. ``--dry-run`` prints it with its basis, the run's budget
admits cases by it, and the end of a run sets it against what the processes took (``took_lines``).

* measured: the case itself ran here (the same timing identity, machine and backend versions): the
  median wall time of its newest ``NEWEST`` worker processes;
* scaled: cases of the same workload, backend, device and mode ran here, not this one: the model's
  figure times the median of what those took over what the model said for them (the model was 10x short
  for llama.cpp and 3x for a compiled torch decode: its per-backend guesses at start-up and compile);
* modelled: neither (or a case skipped before it starts: it can't fit its device's memory).
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from xpubench.backends.fingerprint import busy_note
from xpubench.launch.history import Entry, read, timing_id
from xpubench.plan.estimate import case_seconds, describe
from xpubench.plan.fit import refusal

NEWEST = 5          # a case's newest processes its measured estimate is the median of
OFF_BY = 2.0        # the end of a run names the cases whose processes took this many times more (or less)
NAMED = 5           # ... at most this many of them


@dataclass(frozen=True)
class Estimate:
    seconds: float                  # one worker process
    known: bool                     # its work is known (modelled on a chip without a known peak: not)
    basis: str                      # "measured", "scaled" or "modelled"
    processes: int = 0              # the earlier processes here it was learnt from
    compile_s: float | None = None  # what the case's compile took in them (median), where it compiled apart
    modelled: float | None = None   # the model's figure (what the history keeps beside what it took)
    busy: bool = False              # learnt only from processes of runs that started on a busy machine

    def source(self) -> str:
        """Where the figure comes from, as the dry run's table says it."""
        if self.basis == "measured":
            compiled = f", compile {self.compile_s:.3g} s" if self.compile_s else ""
            busy = " while the machine was busy" if self.busy else ""
            return f"{self.processes} earlier process(es) here{busy}{compiled}"
        if self.basis == "scaled":
            return f"modelled, scaled by {self.processes} like it here"
        return "modelled"


def _busy(entry: Entry) -> bool:
    """Its run started while other processes kept the CPU busy (as the run warned: backends/fingerprint.py)."""
    return entry.busy is not None and busy_note(entry.busy) is not None


def quiet_first(entries: list[Entry]) -> list[Entry]:
    """The processes recorded on a quiet machine where there are any, else all (in their order): a run made
    while other work shared the CPU took longer than this machine does (3-10x on the 2-core VM), and an
    estimate learnt from it would say so of every quiet run after it."""
    quiet = [e for e in entries if not _busy(e)]
    return quiet or entries


class Estimator:
    """Estimates of cases on the machine ``env`` describes, from its history (``entries``: read from the
    cache unless given) and ``extra`` entries (a resumed file's own processes)."""

    def __init__(self, env: dict, entries: Iterable[Entry] | None = None, extra: Iterable[Entry] = ()):
        self.env = env
        self.made: dict[str, Estimate] = {}   # by run id: a case is estimated once
        self.by_id: dict[str, list[Entry]] = defaultdict(list)
        self.ratios: dict[tuple, list[float]] = defaultdict(list)
        for e in [*(read(env) if entries is None else entries), *extra]:
            self.by_id[e.id].append(e)
        for e in quiet_first([e for group in self.by_id.values() for e in group]):
            if e.estimate_s:
                self.ratios[(e.workload, e.backend, e.device, e.mode)].append(e.duration_s / e.estimate_s)

    def __call__(self, case) -> Estimate:
        if case.run_id not in self.made:
            self.made[case.run_id] = self._estimate(case)
        return self.made[case.run_id]

    def _estimate(self, case) -> Estimate:
        modelled, known = case_seconds(case, self.env)
        if refusal(case, self.env):
            return Estimate(modelled, known, "modelled", modelled=modelled)
        seen = quiet_first(self.by_id.get(timing_id(case.as_dict()), []))[-NEWEST:]
        if seen:
            compiles = [e.compile_s for e in seen if e.compile_s is not None]
            return Estimate(statistics.median(e.duration_s for e in seen), True, "measured", len(seen),
                            statistics.median(compiles) if compiles else None, modelled,
                            busy=any(_busy(e) for e in seen))
        ratios = self.ratios.get((case.workload, case.backend, case.device, case.mode))
        if ratios:
            return Estimate(modelled * statistics.median(ratios), known, "scaled", len(ratios), modelled=modelled)
        return Estimate(modelled, known, "modelled", modelled=modelled)

    def seconds(self, case) -> float:
        """One worker process of ``case``, in seconds (what the run's budget admits by)."""
        return self(case).seconds


def basis_counts(estimates: Iterable[Estimate]) -> str:
    """"2 learnt from earlier runs here, 1 modelled" (the count of cases per basis)."""
    counts = Counter("modelled" if e.basis == "modelled" else "learnt" for e in estimates)
    said = [f"{counts['learnt']} learnt from earlier runs here"] if counts["learnt"] else []
    return ", ".join(said + ([f"{counts['modelled']} modelled"] if counts["modelled"] else []))


def took_lines(runs: list, estimates: dict[str, Estimate], elapsed_s: float | None = None) -> list[str]:
    """The end of a run: the estimate of the worker processes it started against what they took, and the
    cases whose processes took more than ``OFF_BY`` times their estimate, or less than 1/OFF_BY of it
    (``runs``: this run's Runs, a skipped one took nothing; ``estimates``: by run id, made before the run)."""
    ran = [r for r in runs if r.duration_s and r.case.get("run_id") in estimates]
    if not ran:
        return []
    by_case: dict[str, list] = defaultdict(list)
    for r in ran:
        by_case[r.case["run_id"]].append(r)
    estimated = sum(estimates[r.case["run_id"]].seconds for r in ran)
    took = sum(r.duration_s for r in ran)
    whole = f"; the whole run {describe(elapsed_s)}" if elapsed_s else ""
    lines = [(f"time: estimated {describe(estimated)}, took {describe(took)} ({len(ran)} worker process(es) of "
              f"{len(by_case)} case(s); estimates: {basis_counts(estimates[i] for i in by_case)}{whole})")]
    off = []
    for run_id, group in by_case.items():
        guess, durations = estimates[run_id], sorted(r.duration_s for r in group)
        median = statistics.median(durations)
        if guess.seconds > 0 and not 1 / OFF_BY <= median / guess.seconds <= OFF_BY:
            low, high = describe(durations[0]), describe(durations[-1])
            spread = low if low == high else f"{low} to {high}"
            said = f"{group[0].key}: estimated {describe(guess.seconds)} per process ({guess.source()}), took {spread}"
            off.append((median / guess.seconds, said))
    off.sort(key=lambda item: -max(item[0], 1 / item[0]))
    if off:
        named = "; ".join(text for _, text in off[:NAMED]) + (f"; and {len(off) - NAMED} more" if len(off) > NAMED
                                                              else "")
        lines.append(f"more than {OFF_BY:g}x off: {named}")
    return lines
