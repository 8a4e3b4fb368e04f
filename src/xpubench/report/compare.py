"""`xpubench compare A B [C ...]`: every case of B (and C ...) that matches a case of A by its key, side by
side, with the time ratio and a 95% confidence interval.

The statistic (docs/reports.md, docs/methodology.md): a case's figure is the median of its worker
processes' medians of the headline raw samples (its mode's ``samples``, results/modes.py: matmul
``warm_s``, training ``step_s``, inference ``latency_s``, generation ``decode_token_s`` as each round's mean
step). Its bootstrap resamples both levels, independently in each file: the processes with replacement,
then each drawn process's samples (seeded, 5,000 resamples); the interval is the 2.5th-97.5th percentile of
figure(B*) / figure(A*). A difference is called only when
- the interval excludes 1,
- the ratio is at least ``min_change`` (default 5%) away from 1, and
- with two or more processes on each side, the processes separate: every process of one side was
  slower than every process of the other (one slow process, the machine's doing, can't make a verdict).
Otherwise the verdict is "not significant". With one process on a side the between-process noise is
unknown: a difference is still called from the samples, but marked "(provisional)". Fewer than 3
samples on either side: "not significant" (spread unknown).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xpubench import analysis
from xpubench.errors import UserError, warn_caller
from xpubench.report.base.frame import Entry, entries, timing_name, variant
from xpubench.report.tables.environment import differences, file_fingerprints
from xpubench.report.tables.target import compare_fields as target_compare_fields
from xpubench.results.fold import process_groups
from xpubench.results.ratio import MIN_CHANGE, ratio_estimate
from xpubench.results.schema import finite
from xpubench.results.stats import as_groups
from xpubench.workloads import options_text

CASE_FIELDS = {"workload": "workloads", "backend": "backends", "device": "devices", "precision": "precisions",
               "batch_size": "batch sizes", "size": "matrix sizes", "users": "users", "rate": "request rates",
               "devices": "device counts", "data": "data"}
RUN_FIELDS = {"epochs": "epochs", "steps": "steps per epoch", "train_samples": "training samples",
              "eval_samples": "evaluation samples", "time_budget_s": "time budget (s)", "compile": "compile setting",
              "seed": "seed"}
# decided in the worker (defaults differ by device), so recorded with the measurement, not in the case
MEASUREMENT_FIELDS = {"sync": "synchronisation (--sync)", "step_ahead": "steps run one ahead (--sync step)",
                      "matmul_precision": "matmul precision"}


BUSIER_LOAD = 0.5     # 1-min load average (runnable tasks) more on the slower side: other work competed
BUSIER_STEAL = 0.05   # or 5 points more of the CPU time taken by the hypervisor for other guests

@dataclass
class CompareRow:
    key: str
    figure: str | None          # the raw samples compared, e.g. "step_s"
    median_a_s: float | None    # the figure: median of the process medians
    median_b_s: float | None
    n_a: int                    # samples, all processes together
    n_b: int
    processes_a: int
    processes_b: int
    ratio: float | None         # time of B / time of A (> 1: B is slower)
    ci_low: float | None
    ci_high: float | None
    significant: bool
    verdict: str
    note: str = ""
    mode: str | None = None     # the case's mode (--fail-on names a mode or its headline figure)
    label: str = ""             # the key's options in words ("4/30 layers, pp64, tg16, eager decode": like with like)


@dataclass
class Comparison:
    """B (``other``) against A (``baseline``)."""

    baseline: str
    other: str
    rows: list[CompareRow]
    environment: list[str] = field(default_factory=list)   # fingerprint differences
    cases: list[str] = field(default_factory=list)         # case-level differences (dtype, batch, steps...)
    min_change: float = MIN_CHANGE
    curves: list[str] = field(default_factory=list)        # cases with a target: each side's curve as text
    chart: Any = None                                      # ... and the metric against wall time (a Chart)

    @property
    def warnings(self) -> list[str]:
        return self.environment + self.cases

    def as_dict(self) -> dict:
        from xpubench.report.compare_gate import geometric_mean, group_of

        return {"baseline": self.baseline, "other": self.other,
                "rows": [asdict(r) | {"group": group_of(r)} for r in self.rows],
                "geometric_mean": geometric_mean(self.rows),
                "environment_differences": self.environment, "case_differences": self.cases,
                "min_change": self.min_change, "curves": self.curves}


def compare_row(a: Entry, b: Entry, *, min_change: float = MIN_CHANGE) -> CompareRow:
    ra, rb = a.result, b.result
    figure = timing_name(ra) if timing_name(ra) == timing_name(rb) else None
    ga, gb = (as_groups(process_groups(r, figure)) if figure else [] for r in (ra, rb))

    def fig(groups):
        return float(np.median([np.median(g) for g in groups])) if groups else None

    label = ", ".join(filter(None, [options_text(ra.case), variant(ra)]))   # "4/30 layers, pp64, tg16, eager decode"
    base = {"key": ra.key, "label": label, "figure": figure, "mode": ra.case.mode,
            "n_a": sum(g.size for g in ga), "n_b": sum(g.size for g in gb),
            "processes_a": len(ga), "processes_b": len(gb), "median_a_s": fig(ga), "median_b_s": fig(gb)}
    bad = [f"{label} {r.status}" for label, r in (("A", ra), ("B", rb)) if r.status != "ok"]
    if bad:
        return CompareRow(**base, ratio=None, ci_low=None, ci_high=None, significant=False,
                          verdict="n/a: " + ", ".join(bad))
    if ra.metrics.get("target") or rb.metrics.get("target"):   # time to target over the seeds (report/tables/target.py)
        return CompareRow(**(base | target_compare_fields(ra, rb, min_change)))
    est = ratio_estimate(ga, gb, min_change=min_change) if figure else None
    if est is None:
        return CompareRow(**base, ratio=None, ci_low=None, ci_high=None, significant=False,
                          verdict="n/a: no timing samples")
    note = est.note
    if est.significant:
        slow, fast = (rb, ra) if est.ratio > 1 else (ra, rb)
        note = "; ".join(filter(None, [note, busier_machine(slow, fast)]))
    return CompareRow(**base, ratio=est.ratio, ci_low=est.low, ci_high=est.high, significant=est.significant,
                      verdict=est.verdict, note=note)


def _machine_mean(result, name: str) -> float | None:
    values = [r.machine.get(name) for r in result.ok_runs]
    values = [v for v in values if isinstance(v, (int, float))]
    return float(np.mean(values)) if values else None


def busier_machine(slow, fast) -> str:
    """Why a called change may be the machine's and not the code's: the slower side's processes started on
    a busier machine (1-min load average) or lost more CPU time to the hypervisor (steal). "" if neither.
    The verdict stands (the slower side was slower); the note says what else differed."""
    parts = []
    ls, lf = _machine_mean(slow, "load_1m_start"), _machine_mean(fast, "load_1m_start")
    if ls is not None and lf is not None and ls - lf >= BUSIER_LOAD:
        parts.append(f"1-min load {ls:.2f} vs {lf:.2f}")
    ss, sf = _machine_mean(slow, "steal_fraction"), _machine_mean(fast, "steal_fraction")
    if ss is not None and sf is not None and ss - sf >= BUSIER_STEAL:
        parts.append(f"steal {ss:.0%} vs {sf:.0%} of CPU time")
    if not parts:
        return ""
    return "slower side on a busier machine: " + ", ".join(parts) + "; other work may explain it"


def _values(items: list[Entry], name: str) -> str:
    vals = sorted({str(getattr(e.result.case, name)) for e in items if getattr(e.result.case, name) is not None})
    return ", ".join(vals) or "none"


def case_differences(a: list[Entry], b: list[Entry], matched: list[tuple[Entry, Entry]]) -> list[str]:
    """What differs in the cases themselves: the sets of dtypes, batch sizes... and the run-length knobs
    (epochs, steps, time budget, compile setting) of cases that matched."""
    lines = []
    for name, label in CASE_FIELDS.items():
        va, vb = _values(a, name), _values(b, name)
        if va != vb:
            lines.append(f"{label}: {va} (A) vs {vb} (B)")
    for fields, read in ((RUN_FIELDS, lambda r, name: getattr(r.case, name)),
                         (MEASUREMENT_FIELDS, lambda r, name: r.metrics.get(name))):
        for name, label in fields.items():
            pairs = [(read(x.result, name), read(y.result, name)) for x, y in matched]
            differing = [(va, vb) for va, vb in pairs if va != vb]
            if differing:
                va, vb = differing[0]
                lines.append(f"{label}: {va} (A) vs {vb} (B) in {len(differing)} of {len(matched)} matched cases")
    only_a = len({e.result.key for e in a} - {e.result.key for e in b})
    only_b = len({e.result.key for e in b} - {e.result.key for e in a})
    if only_a or only_b:
        lines.append(f"unmatched cases: {only_a} only in A, {only_b} only in B (left out)")
    return lines


def _by_key(items: list[Entry]) -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    for e in items:
        out.setdefault(e.result.key, e)  # a key twice in one file (should not happen): the first one
    return out


def _warn(message: str) -> None:
    warn_caller(message)   # at the user's line (xpubench.compare -> ... -> here)


def compare_loaded(loaded, *, min_change: float = MIN_CHANGE,
                   on_warning: Callable[[str], None] | None = None) -> list[Comparison]:
    """Every file after the first against the first. Refuses (UserError, one line) when no case matches.

    A later file that matches no case of the first (with 3+ files, when another one does match) is left
    out with a warning: to ``on_warning(line)``, else a Python warning (notebooks)."""
    if len(loaded) < 2:
        raise UserError("compare needs at least two results files")
    for f in loaded:
        if not getattr(f, "results", True):   # only a torn line in it
            raise UserError(f"{f.path} holds no complete result: nothing to compare")
    items = entries(loaded)
    sources = list(dict.fromkeys(e.source for e in items))
    groups = {s: [e for e in items if e.source == s] for s in sources}
    from xpubench.report.charts.target import compared_curves as target_curves  # matplotlib: only to draw

    fps = file_fingerprints(items)
    base = sources[0]
    comparisons, skipped = [], []
    for other in sources[1:]:
        a, b = _by_key(groups[base]), _by_key(groups[other])
        matched = [(a[k], b[k]) for k in a if k in b]
        if not matched:
            skipped.append(other)
            continue
        rows = [compare_row(x, y, min_change=min_change) for x, y in matched]
        env = differences((fps[base] or [{}])[0], (fps[other] or [{}])[0])
        curves = target_curves(matched)   # a target's curves (report/charts/target.py)
        comparisons.append(Comparison(base, other, rows, env, case_differences(groups[base], groups[other], matched),
                                      min_change, *curves))
    if not comparisons:
        first = sorted({e.result.key for e in groups[base]})[:2]
        second = sorted({e.result.key for e in groups[sources[1]]})[:2]
        raise UserError(f"nothing to compare: no case of {', '.join(sources[1:])} matches a case of {base} "
                        f"(e.g. {', '.join(first) or 'none'} vs {', '.join(second) or 'none'})")
    for other in skipped:
        example = sorted({e.result.key for e in groups[other]})[:1]
        (on_warning or _warn)(f"{other} left out: none of its {len(groups[other])} cases matches a case of "
                              f"{base} (e.g. {', '.join(example) or 'none'})")
    return comparisons


def compare_files(*paths, min_change: float = MIN_CHANGE,
                  on_warning: Callable[[str], None] | None = None) -> list[Comparison]:
    """Compare results files: the second (and later) against the first. One Comparison per later file
    that matches (see compare_loaded for one that does not)."""
    if len(paths) == 1 and not isinstance(paths[0], (str, Path)):
        paths = tuple(paths[0])
    if len(paths) < 2:
        raise UserError("compare needs at least two results files")
    return compare_loaded(analysis.load(list(paths)), min_change=min_change, on_warning=on_warning)


def render(comparisons: list[Comparison], fmt: str = "table", console=None, gate: dict | None = None) -> str | None:
    """Text of the comparison in ``fmt`` (md, html, json, csv); "table" prints to ``console`` and returns None.
    ``gate``: compare_gate.gate_summary's verdict, shown with the tables (and as JSON's ``gate`` key)."""
    from xpubench.report import compare_render

    if fmt == "json":
        blob = [c.as_dict() | ({"gate": _gate_of(gate, c)} if gate else {}) for c in comparisons]
        return json.dumps(finite(blob), indent=1, allow_nan=False)
    if fmt == "csv":
        return compare_render.csv_text(comparisons)
    if fmt == "md":
        return compare_render.markdown(comparisons, gate)
    if fmt == "html":
        return compare_render.html_page(comparisons, gate)
    if fmt == "table":
        compare_render.print_tables(comparisons, console, gate=gate)
        return None
    raise UserError(f"unknown compare format {fmt!r}; choose from table, md, html, json, csv")


def _gate_of(gate: dict, comparison: Comparison) -> dict:
    """One comparison's part of the gate's verdict (its thresholds, failed and not-gated rows)."""
    mine = next(p for p in gate["comparisons"] if (p["baseline"], p["other"]) == (comparison.baseline,
                                                                                   comparison.other))
    return {"thresholds": gate["thresholds"], "passed": not mine["failed"], "failed": mine["failed"],
            "not_gated": mine["not_gated"]}
