"""A time budget for a whole run (``--budget SECONDS``; 150 s for the default run): worker start and
compilation included, since they are part of every worker process's wall time.

The runner asks three things of a ``Budget``:

- ``order(cases)``: each workload's first case early, cheapest first (then each workload x backend's
  first case, cheapest first, then the rest in plan order), so a tight budget still measures as many
  workloads as it can;
- ``admit(case, process)``: whether the next worker process fits in the time left (less ``RESERVE_S`` for
  the closing output and the interpreter's start and exit). A case's first process is judged by its
  estimate (``estimate.case_seconds``) times the ratio of what the finished processes took to what they
  were estimated to take (re-planned after every process); a further process by what this case's own
  processes took (measured, not estimated), times ``REPEAT_SAFETY``. A case's first process that cannot
  fit makes the case ``skipped`` with the reason; a further process that cannot fit is not started (the
  case keeps fewer processes than asked for, at least the one it has);
- ``timeout(timeout_s)``: a worker's timeout capped by the time left less the reserve (plus ``margin_s``,
  0 unless a caller gives one). This is what holds the line when an estimate is wrong: a worker still running
  there is stopped (its result says the budget was spent), so the run ends within the budget plus what
  its closing output takes beyond the reserve, whatever the estimates said.

The clock is injectable (tests use a fake one); nothing here starts a process.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable

MARGIN_S = 0.0                 # a worker may overrun the time left (less the reserve) by this much
SCALE_LIMITS = (0.1, 10.0)     # the re-planning ratio is kept within these (one odd process can't zero it)
RESERVE_S = 5.0                # kept for the run's closing output and exit (measured ~1 s on a 2-core VM)
REPEAT_SAFETY = 1.25           # a case's further process (optional) is started only with this much room


def first_cases_first(cases: Iterable, estimate: Callable[[object], float] | None = None) -> list:
    """Accelerator cases before the CPU's (a machine with an accelerator is there to measure it), each
    side as follows: each workload's first case, then each (workload, backend)'s first case, then the
    others in plan order. With ``estimate``, the first two tiers run cheapest first (so a tight budget
    measures as many workloads as it can). Order inside one workload x backend is kept (ascending batch
    sizes: an OOM at B still skips the larger ones after it)."""
    from xpubench.devices.device import is_accelerator

    cases = list(cases)
    seen_workloads: set = set()
    seen_pairs: set = set()
    keys = []
    for i, case in enumerate(cases):
        pair = (case.workload, case.backend)
        tier = 0 if case.workload not in seen_workloads else 1 if pair not in seen_pairs else 2
        seen_workloads.add(case.workload)
        seen_pairs.add(pair)
        cost = estimate(case) if estimate and tier < 2 else 0.0
        keys.append((not is_accelerator(case.device), tier, cost, i))
    return [cases[i] for *_, i in sorted(keys)]


@dataclasses.dataclass
class Budget:
    """The time left of a run and the re-planned estimates (see the module docstring)."""

    total_s: float
    estimate: Callable[[object], float]          # a case -> estimated seconds of one worker process
    clock: Callable[[], float] = time.monotonic
    margin_s: float = MARGIN_S
    started: float | None = None
    reserve_s: float = 0.0                       # api.run: RESERVE_S
    repeat_safety: float = 1.0                   # api.run: REPEAT_SAFETY
    measured_s: float = 0.0                      # wall time of the finished processes
    estimated_s: float = 0.0                     # what those same processes were estimated to take
    took: dict[str, float] = dataclasses.field(default_factory=dict)   # key -> its longest finished process
    skipped: list[str] = dataclasses.field(default_factory=list)   # keys of the cases skipped
    cut: dict[str, int] = dataclasses.field(default_factory=dict)  # key -> processes not started

    def __post_init__(self):
        if self.started is None:
            self.started = self.clock()

    def order(self, cases: Iterable) -> list:
        return first_cases_first(cases, self.estimate)

    def elapsed(self) -> float:
        return self.clock() - self.started

    def left(self) -> float:
        return max(0.0, self.total_s - self.elapsed())

    @property
    def scale(self) -> float:
        """Measured / estimated over the finished processes (1 before any finished)."""
        if self.estimated_s <= 0 or self.measured_s <= 0:
            return 1.0
        low, high = SCALE_LIMITS
        return min(high, max(low, self.measured_s / self.estimated_s))

    def expected(self, case, process: int = 0) -> float:
        """Seconds one more worker process of the case should take: a further process, what the case's
        own processes took; a first one, its estimate re-planned by ``scale``."""
        if process > 0 and case.key in self.took:
            return self.took[case.key]
        return self.estimate(case) * self.scale

    def admit(self, case, process: int) -> str | None:
        """None when the process fits in the time left; else why not (and it is noted as skipped / cut)."""
        need, left = self.expected(case, process), max(0.0, self.left() - self.reserve_s)
        if process > 0:
            need *= self.repeat_safety
        if need <= left:
            return None
        if process > 0:
            self.cut[case.key] = self.cut.get(case.key, 0) + 1
            return f"process {process + 1} does not fit"
        self.skipped.append(case.key)
        scaled = "" if math.isclose(self.scale, 1.0) else f" (estimate x {self.scale:.2f}, as measured so far)"
        return (f"the run's {self.total_s:g} s budget has {left:.0f} s left, this case needs about "
                f"{need:.0f} s{scaled}; give more with --budget SECONDS")

    def record(self, case, wall_s: float) -> None:
        """A finished worker process: its wall time against its estimate re-plans the cases left."""
        if wall_s > 0:
            self.measured_s += wall_s
            self.estimated_s += self.estimate(case)
            self.took[case.key] = max(wall_s, self.took.get(case.key, 0.0))

    def timeout(self, timeout_s: float) -> float:
        """A worker's timeout, at most the time left less the reserve, plus the margin (rounded down to a
        tenth of a second, so never past the line; at least a tenth)."""
        line = max(0.0, self.left() - self.reserve_s) + self.margin_s
        return min(timeout_s, max(0.1, math.floor(round(line * 10, 6)) / 10))

    def summary(self, processes: int) -> str | None:
        """One sentence after the run when the budget changed it, else None."""
        parts = []
        if self.skipped:
            parts.append(f"{len(self.skipped)} case(s) skipped")
        if self.cut and processes > 1:
            parts.append(f"{len(self.cut)} case(s) ran fewer than {processes} processes")
        if not parts:
            return None
        return (f"the run's {self.total_s:g} s budget: {' and '.join(parts)} (took {self.elapsed():.0f} s); "
                "give more with --budget SECONDS")


def preview(cases: Iterable, processes: int, total_s: float, estimate: Callable[[object], float]
            ) -> tuple[dict[str, int], list[str]]:
    """What a run with this budget would do if every process took its estimate (``--dry-run``):
    ({case key: processes run}, keys of the cases skipped), on a simulated clock."""
    now = [0.0]
    budget = Budget(total_s, estimate=estimate, clock=lambda: now[0])
    ran: dict[str, int] = {}
    for process in range(processes):
        for case in budget.order(cases):
            if case.key in budget.skipped or ran.get(case.key, 0) < process:
                continue
            if budget.admit(case, process) is None:
                now[0] += estimate(case)
                ran[case.key] = ran.get(case.key, 0) + 1
    return ran, list(budget.skipped)
