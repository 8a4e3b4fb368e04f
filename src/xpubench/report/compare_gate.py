"""`xpubench compare --fail-on`: the regression gate a CI job runs, and the summary every comparison shows.

Designed after asv's ``asv continuous --factor`` (a factor AND a statistical test on the raw samples: a
change fails only when both agree) and pytest-benchmark's ``--benchmark-compare-fail=min:5%`` (one
threshold per statistic, a list allowed). ``--fail-on`` takes a default threshold and per-metric ones:
``5%``, ``decode_token_s=3%``, ``5%,train=10%``. A metric is named as a comparison row is: its timing
(``warm_s``, ``step_s``, ``latency_s``, ``pass_s``, ``decode_token_s``, ``time_to_target``), its mode
(``matmul``, ``train``, ``infer``, ``generate``) or the mode's headline figure (``tokens_per_s``,
``samples_per_s``, ``warm_flops_per_s``, ``decode_tokens_per_s``: the rate is the time's inverse, so
the same threshold reads the same change). The most specific name wins: timing, then headline, then mode.

A row fails the gate only when all of these hold (docs/reports.md, "The regression gate"):
- compare called it slower (its 95% two-level interval excludes 1 and the change is at least
  ``--min-change``, lowered to the smallest threshold given),
- B/A is at least 1 + the row's threshold,
- the processes separate: two or more processes on each side and every process of B slower than every
  process of A. One process on a side ("provisional") is never enough to fail a build: the noise between
  processes (1.8x seen on shared VMs) is not in its interval; such rows are listed as not gated.
A case ok in A that failed in B (error, crash, oom, timeout) fails too: a crash is a regression.

Rows are grouped as pyperf's ``compare_to --table -G`` groups them: slower, faster, not significant,
n/a; each comparison carries the geometric mean of B/A over its matching cases with a ratio.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from xpubench.errors import UserError
from xpubench.results.modes import MODES

GROUPS = ("slower", "faster", "not significant", "n/a")
BROKEN = ("error", "crash", "oom", "timeout")
_ITEM = re.compile(r"^(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*)?(?P<pct>[0-9]*\.?[0-9]+)\s*%?$")


def metric_names() -> dict[str, int]:
    """{name --fail-on accepts: its rank (lower is more specific)}: timings, headline figures, modes."""
    names: dict[str, int] = {"time_to_target": 0}
    for mode in MODES.values():
        names.update({s: 0 for s in mode.samples})
        names.update({f.metric: 1 for f in mode.headline})
        names[mode.name] = 2
    return names


@dataclass(frozen=True)
class Thresholds:
    """A default threshold (a fraction, None: only the named metrics are gated) and {metric: fraction}."""

    default: float | None = None
    named: dict[str, float] = field(default_factory=dict)

    @property
    def smallest(self) -> float:
        return min([*self.named.values(), *([self.default] if self.default is not None else [])])

    def for_row(self, row) -> tuple[float | None, str]:
        """(the row's threshold, what set it: a metric name or "default"); (None, "") when ungated."""
        candidates = [row.figure, *_headlines(row.mode), row.mode]
        for name in candidates:
            if name and name in self.named:
                return self.named[name], name
        return (self.default, "default") if self.default is not None else (None, "")

    def as_dict(self) -> dict:
        return {"default": self.default, "named": dict(self.named)}


def _headlines(mode_name) -> list[str]:
    mode = MODES.get(str(mode_name)) if mode_name else None
    return [f.metric for f in mode.headline] if mode else []


def parse_fail_on(text: str) -> Thresholds:
    """``5%`` / ``tokens_per_s=3%,step_s=5%`` / ``5%,generate=10%`` -> Thresholds; UserError (one line)."""
    known = metric_names()
    default, named = None, {}
    for item in (p.strip() for p in str(text).split(",")):
        m = _ITEM.match(item)
        if not m:
            raise UserError(f"--fail-on {text!r}: {item!r} is not PCT or METRIC=PCT (e.g. 5% or step_s=3%)")
        value = float(m["pct"]) / 100
        if not 0 < value < 10:
            raise UserError(f"--fail-on {text!r}: {item!r}: a threshold is a percentage above 0 (e.g. 5%)")
        name = m["name"]
        if name is None:
            if default is not None:
                raise UserError(f"--fail-on {text!r}: two default thresholds; give one, and METRIC=PCT for others")
            default = value
        elif name not in known:
            raise UserError(f"--fail-on {text!r}: unknown metric {name!r}; choose from {', '.join(sorted(known))}")
        elif name in named:
            raise UserError(f"--fail-on {text!r}: {name} given twice")
        else:
            named[name] = value
    return Thresholds(default, named)


def group_of(row) -> str:
    if row.ratio is None:
        return "n/a"
    if not row.significant:
        return "not significant"
    return "slower" if row.ratio > 1 else "faster"


def grouped(rows) -> list[tuple[str, list]]:
    """(group, its rows) in GROUPS order, empty groups left out; slower rows slowest first, faster fastest."""
    out = []
    for name in GROUPS:
        members = [r for r in rows if group_of(r) == name]
        if name == "slower":
            members.sort(key=lambda r: -r.ratio)
        elif name == "faster":
            members.sort(key=lambda r: r.ratio)
        if members:
            out.append((name, members))
    return out


def geometric_mean(rows) -> float | None:
    """Geometric mean of B/A over the rows with a ratio (every matching case measured on both sides)."""
    ratios = [r.ratio for r in rows if r.ratio is not None and r.ratio > 0 and math.isfinite(r.ratio)]
    return math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else None


def ratio_text(ratio: float | None) -> str:
    """B/A as words: "1.52x slower", "1.10x faster"; one that rounds to 1.00x either way: "the same (1.00x)"."""
    if ratio is None:
        return "n/a"
    if f"{max(ratio, 1 / ratio):.2f}" == "1.00":
        return "the same (1.00x)"
    return f"{ratio:.2f}x slower" if ratio > 1 else f"{1 / ratio:.2f}x faster"


def geometric_mean_line(comparison) -> str:
    rows = [r for r in comparison.rows if r.ratio is not None]
    mean = geometric_mean(rows)
    if mean is None:
        return "geometric mean: n/a (no matching case has a ratio)"
    return f"geometric mean of B/A over {len(rows)} matching case(s): {mean:.3f} ({ratio_text(mean)})"


@dataclass(frozen=True)
class GateRow:
    key: str
    verdict: str
    threshold: float | None
    threshold_from: str
    reason: str

    def as_dict(self) -> dict:
        return {"key": self.key, "verdict": self.verdict, "threshold": self.threshold,
                "threshold_from": self.threshold_from, "reason": self.reason}


def _broken(row) -> bool:
    return row.verdict.startswith("n/a:") and any(f"B {s}" in row.verdict for s in BROKEN) and not any(
        f"A {s}" in row.verdict for s in (*BROKEN, "skipped"))


def gate(comparison, thresholds: Thresholds) -> tuple[list[GateRow], list[GateRow]]:
    """(rows that fail the gate, slower rows that could not be gated: one process on a side)."""
    failed, ungated = [], []
    for row in comparison.rows:
        limit, origin = thresholds.for_row(row)
        if limit is None:
            continue
        if _broken(row):
            failed.append(GateRow(row.key, row.verdict, limit, origin, "ok in A, failed in B"))
            continue
        if group_of(row) != "slower" or row.ratio < 1 + limit:
            continue
        if min(row.processes_a, row.processes_b) < 2:
            ungated.append(GateRow(row.key, row.verdict, limit, origin, "one process on a side: the noise "
                                   "between processes is unknown; measure with --processes 3 or more"))
            continue
        failed.append(GateRow(row.key, row.verdict, limit, origin,
                              f"B/A {row.ratio:.3f} >= {1 + limit:.2f} and every process of B slower than "
                              "every process of A"))
    return failed, ungated


def gate_summary(comparisons, thresholds: Thresholds) -> dict:
    """Every comparison's gate, as it goes into JSON and decides the exit code."""
    per = []
    for c in comparisons:
        failed, ungated = gate(c, thresholds)
        per.append({"baseline": c.baseline, "other": c.other, "failed": [g.as_dict() for g in failed],
                    "not_gated": [g.as_dict() for g in ungated]})
    return {"thresholds": thresholds.as_dict(), "passed": not any(p["failed"] for p in per), "comparisons": per}


def gate_lines(summary: dict) -> list[str]:
    """The gate's verdict in lines for stderr (and the end of a terminal table)."""
    lines = []
    for p in summary["comparisons"]:
        for g in p["failed"]:
            lines.append(f"FAIL {p['other']} vs {p['baseline']}: {g['key']}: {g['verdict']} (threshold "
                         f"{g['threshold']:.0%} from {g['threshold_from']}; {g['reason']})")
        for g in p["not_gated"]:
            lines.append(f"not gated {p['other']} vs {p['baseline']}: {g['key']}: {g['verdict']} ({g['reason']})")
    failed = sum(len(p["failed"]) for p in summary["comparisons"])
    lines.append(f"compare --fail-on: {'FAILED' if failed else 'passed'}: {failed} case(s) slower beyond the "
                 "threshold with separated processes" + ("" if failed else "; exit 0"))
    return lines
