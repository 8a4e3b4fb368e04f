"""Time to target in every output: the table (terminal, Markdown, HTML), the summary's cells, the answer's
ranking, the precision / batch-size sweep sentences, compare's figures, and in the terminal each setup's
curve as text and each worker process's line. The chart of the metric against wall time:
report/charts/target.py. The arithmetic (trimmed mean, bootstrap intervals): results/target_stats.py.

A case's time to target is MLPerf's trimmed mean over its seeds (one worker process each); "not
reached" is said as such, with the best value seen, never shown as a time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from xpubench.legible.units import fmt_rate
from xpubench.report.base.cells import batch, fmt, fmt_seconds, identity
from xpubench.report.base.frame import (
    ResultSet,
    many_sources,
    measured_at,
    measured_at_column,
    num,
    ok_rows,
    series_label,
    setting,
)
from xpubench.report.base.table import ALWAYS, LOW, Column, Table
from xpubench.results import target_stats
from xpubench.results.targets import parse

GROUP = ["source", "workload", "target"]   # setups ranked against each other


def is_target_row(row) -> bool:
    """Whether a frame row is a case with a quality target."""
    value = row.get("target")
    return isinstance(value, str) and bool(value)


def target_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The training cases with a target that finished ok, ranked within each workload and target."""
    rows = ok_rows(frame, "train")
    if rows.empty or "target" not in rows:
        return rows.iloc[0:0]
    rows = rows[rows["target"].notna()]
    if rows.empty:
        return rows
    time = pd.to_numeric(rows.get("time_to_target_s"), errors="coerce")
    return rows.assign(_time=time).sort_values([*GROUP, "_time", "backend"], na_position="last").drop(columns="_time")


def seed_times(result) -> list[float | None]:
    """Each ok seed's time to target (None: not reached), in process order."""
    return [r.metrics.get("time_to_target_s") for r in result.ok_runs or [result]]


def time_cell(row) -> str:
    if not row.get("target_reached"):
        return "not reached"
    return fmt_seconds(num(row, "time_to_target_s"))


def interval_cell(row) -> str:
    low, high = num(row, "time_to_target_ci95_low_s"), num(row, "time_to_target_ci95_high_s")
    if low is None:
        return "n/a"
    return f"{fmt_seconds(low)} - {fmt_seconds(high) if high is not None else 'unbounded'}"


def reached_cell(row) -> str:
    seeds, hit = num(row, "seeds"), num(row, "seeds_reached")
    return "n/a" if seeds is None or hit is None else f"{int(hit)}/{int(seeds)}"


def range_cell(row) -> str:
    low, high = num(row, "time_to_target_min_s"), num(row, "time_to_target_max_s")
    return "n/a" if low is None else f"{fmt_seconds(low)} - {fmt_seconds(high)}"


def set_up_cell(row) -> str:
    init, comp = num(row, "init_s"), num(row, "compile_s")
    return fmt_seconds(init) + (f" + {fmt_seconds(comp)}" if comp is not None else "")


def target_table(frame: pd.DataFrame) -> Table:
    """One row per case with a target: its time to target over the seeds, beside its samples/s and epochs."""
    rows = target_rows(frame)
    cols = [Column("workload", lambda r: str(r["workload"]), text=True), *identity(rows), Column("batch", batch),
            Column("target", lambda r: str(r["target"]), text=True, priority=ALWAYS),
            Column("reached", reached_cell, priority=ALWAYS),
            Column("time to target", time_cell, priority=ALWAYS),
            Column("95% interval", interval_cell, priority=1),
            Column("median", lambda r: fmt_seconds(num(r, "time_to_target_median_s")), priority=LOW),
            Column("fastest - slowest", range_cell, priority=2),
            Column("eval off", lambda r: fmt_seconds(num(r, "time_to_target_no_eval_s")), priority=2),
            Column("epochs", lambda r: fmt(num(r, "epochs_to_target"), ".3g"), priority=1),
            Column("samples", lambda r: fmt(num(r, "samples_to_target"), ",.0f"), priority=LOW),
            Column("samples/s", lambda r: fmt_rate(num(r, "samples_per_s")), priority=1),
            Column("best", lambda r: fmt(num(r, "target_best"), ".4g"), priority=2),
            Column("set-up + compile", set_up_cell, priority=LOW),
            Column("lr", lambda r: fmt(num(r, "learning_rate"), "g"), priority=LOW)]
    return Table("Time to target", cols, rows, note=TABLE_NOTE)


TABLE_NOTE = ("time to target = MLPerf's mean over the seeds with the fastest and slowest dropped (one seed "
              "short of the target counts as the slowest; two leave no time), evaluations on the clock, "
              "set-up and compile off it; 95% interval: a bootstrap over the seeds; eval off = the same "
              "without the evaluation passes; epochs and samples: median over the seeds that reached it.")


def _setup(row, with_batch: bool = True) -> str:
    return series_label(row, with_source=False, with_batch=with_batch)


def _ratio_text(est) -> str:
    high = "unbounded" if est.high is None else f"{est.high:.2f}"
    return f"95% interval {est.low:.2f}-{high}" if est.low is not None else est.note


def ranking_lines(data: ResultSet) -> list[str]:
    """Per workload and target: the setups ranked by time to target, each against the fastest with the
    bootstrap interval of the ratio; setups that did not reach it named with their best value."""
    rows = target_rows(data.frame)
    lines = []
    for (_, workload, target), group in rows.groupby(GROUP, sort=False):
        reached = [r for _, r in group.iterrows() if r.get("target_reached")]
        missed = [r for _, r in group.iterrows() if not r.get("target_reached")]
        head = f"{workload} to {target}"
        if reached:
            best = reached[0]
            ci = interval_cell(best)
            parts = [f"{head}: fastest here {_setup(best)}, {time_cell(best)} ({reached_cell(best)} seeds reached it"
                     + (f"; 95% interval {ci}" if ci != "n/a" else "") + ")"]
            for other in reached[1:]:
                est = target_stats.ratio(seed_times(data.result(best)), seed_times(data.result(other)))
                if est is None:
                    continue
                if est.significant:
                    parts.append(f"{est.ratio:.2f}x sooner than {_setup(other)} ({time_cell(other)}; "
                                 f"{_ratio_text(est)})")
                else:
                    parts.append(f"not significantly sooner than {_setup(other)} ({time_cell(other)}, "
                                 f"{est.ratio:.2f}x: {est.note})")
            lines.append("; ".join(parts))
        for r in missed:
            seeds, hit = num(r, "seeds"), num(r, "seeds_reached")
            short = f"{int(seeds - hit)} of {int(seeds)} seeds" if seeds is not None and hit is not None else "n/a"
            lines.append(f"{head}: {_setup(r)} not reached: {short} fell short in "
                         f"{fmt(num(r, 'max_epochs'), 'g')} epochs (best {fmt(num(r, 'target_best'), '.4g')})")
    return lines


def _ratio(a, b) -> float | None:
    return a / b if a and b else None


def sweep_lines(data: ResultSet) -> list[str]:
    """Setups that differ only in precision (against fp32) or batch size (against the smallest): samples/s,
    epochs to target and time to target side by side, so a faster step that needs more epochs shows;
    with the learning rate each batch size ran at (xpubench does not scale it with the batch size)."""
    rows = target_rows(data.frame)
    lines = []
    same = [*GROUP, "backend", "device", "devices"]
    for _, group in rows.groupby(same, sort=False, dropna=False):
        group = group.assign(at=measured_at_column(group))   # the batch size a training case is measured at
        for vary, fixed in (("precision", "at"), ("at", "precision")):
            for _, sub in group.groupby(fixed, sort=False, dropna=False):
                if sub[vary].nunique() < 2:
                    continue
                base = sub[sub["precision"] == "fp32"] if vary == "precision" else sub.sort_values("at")
                if base.empty:
                    continue
                base = base.iloc[0]
                for _, r in sub.iterrows():
                    if r[vary] != base[vary]:
                        lines.append(_sweep_line(data, r, base, vary))
    return lines


def _sweep_line(data: ResultSet, row, base, vary: str) -> str:
    what = (f"{row['precision']} against fp32" if vary == "precision"
            else f"{setting(row)} against {measured_at(base)}")
    speed = _ratio(num(row, "samples_per_s"), num(base, "samples_per_s"))
    epochs = _ratio(num(row, "epochs_to_target"), num(base, "epochs_to_target"))
    parts = [f"{row['workload']} {row['backend']} {row['device']}, {what}: "
             + ("n/a" if speed is None else f"{speed:.2f}x the samples/s")]
    if epochs is not None:
        parts.append(f"{epochs:.2f}x the epochs to {row['target']}")
    est = target_stats.ratio(seed_times(data.result(row)), seed_times(data.result(base)))
    if not row.get("target_reached"):
        parts.append(f"target not reached (best {fmt(num(row, 'target_best'), '.4g')})")
    elif est is not None:
        sooner = "sooner" if est.ratio >= 1 else "later"
        rate = est.ratio if est.ratio >= 1 else 1 / est.ratio
        parts.append(f"reaches it {rate:.2f}x {sooner} ({_ratio_text(est)}" + ("" if est.significant else
                                                                               ": not significant") + ")")
    if vary == "at":
        parts.append(f"learning rate {fmt(num(row, 'learning_rate'), 'g')} at both ({row.get('lr_scaling') or 'n/a'})")
    return ", ".join(parts)


# ---- the summary's cells and compare's figures for a case with a target ------------------------------

def summary_figure(row) -> str:
    """The compact summary's figure: the time to target, or "not reached (best ...)"."""
    if not row.get("target_reached"):
        return f"not reached (best {fmt(num(row, 'target_best'), '.4g')})"
    return f"{fmt_seconds(num(row, 'time_to_target_s'))} to target"


def summary_spread(row) -> str:
    low, high, mid = (num(row, f"time_to_target_{k}") for k in ("ci95_low_s", "ci95_high_s", "s"))
    if mid and low is not None and high is not None:
        return f"±{(high - low) / 2 / mid:.0%}"
    return "-"


def compare_fields(result_a, result_b, min_change: float) -> dict:
    """compare.CompareRow's figures for two cases with the same target: the trimmed means, the seeds, the
    ratio B/A with its bootstrap interval and the verdict (> 1: B takes longer)."""
    ta, tb = seed_times(result_a), seed_times(result_b)
    base = {"figure": "time_to_target", "median_a_s": target_stats.trimmed_mean(ta),
            "median_b_s": target_stats.trimmed_mean(tb), "n_a": len(ta), "n_b": len(tb),
            "processes_a": len(ta), "processes_b": len(tb)}
    targets = (result_a.metrics.get("target"), result_b.metrics.get("target"))
    if targets[0] != targets[1]:
        return base | {"ratio": None, "ci_low": None, "ci_high": None, "significant": False,
                       "verdict": f"n/a: different targets ({targets[0]} vs {targets[1]})"}
    est = target_stats.ratio(ta, tb, min_change=min_change)
    if est is None:
        missing = " and ".join(label for label, m in (("A", base["median_a_s"]), ("B", base["median_b_s"]))
                               if m is None)
        return base | {"ratio": None, "ci_low": None, "ci_high": None, "significant": False,
                       "verdict": f"n/a: target not reached ({missing})"}
    verdict = (f"{est.ratio:.2f}x later" if est.ratio > 1 else f"{1 / est.ratio:.2f}x sooner") \
        if est.significant else "not significant"
    return base | {"ratio": est.ratio, "ci_low": est.low, "ci_high": est.high, "significant": est.significant,
                   "verdict": verdict, "note": est.note}


# ---- the terminal: each setup's curve as text, the table, a worker process's line --------------------

TERMINAL_POINTS = 6   # evaluation points per setup in the terminal (the last one always shown)


def seed_curves(result) -> list[tuple[int | None, list[float], list[float | None]]]:
    """(seed, wall seconds, metric values) of each ok seed's evaluations."""
    out = []
    for run in result.ok_runs or [result]:
        wall, value = run.series.get("target_wall_s") or [], run.series.get("target_value") or []
        if wall:
            out.append((run.metrics.get("seed"), list(wall), list(value)))
    return out


def curve_text(result) -> str:
    """One seed's curve as text: the median seed (by time to target; the first seed when none reached it),
    at most TERMINAL_POINTS evaluations, "✓" where the target was reached."""
    curves = seed_curves(result)
    if not curves:
        return ""
    times = [r.metrics.get("time_to_target_s") for r in (result.ok_runs or [result])]
    reached = sorted((t, i) for i, t in enumerate(times[:len(curves)]) if t is not None)
    seed, wall, value = curves[reached[len(reached) // 2][1] if reached else 0]
    target = parse(result.metrics["target"])
    keep = sorted(set(np.linspace(0, len(wall) - 1, min(TERMINAL_POINTS, len(wall))).round().astype(int)))
    points = [f"{fmt_seconds(wall[i])} {'n/a' if value[i] is None else f'{value[i]:.4g}'}"
              + (" ✓" if target.reached(value[i]) else "") for i in keep]
    return f"seed {seed}: " + " · ".join(points)


def terminal_lines(data: ResultSet) -> list[str]:
    """Per setup with a target: its label and one seed's curve (curve_text)."""
    rows = target_rows(data.frame)
    multi = many_sources(rows) if not rows.empty else False
    out = []
    for _, r in rows.iterrows():
        text = curve_text(data.result(r))
        if text:
            out.append(f"{r['workload']} {series_label(r, with_source=multi, with_batch=True)} to {r['target']}: "
                       f"{text}")
    return out


def curve_lines(data: ResultSet) -> list[str]:
    """The terminal's form of the chart (report/sections.py ``text``): each setup's median-seed curve under
    a heading line; [] when no case has a target."""
    lines = terminal_lines(data)
    return ["The metric against wall time (the median seed):", *(f"  {line}" for line in lines)] if lines else []


def process_headline(result) -> str:
    """A worker process's line while the run goes on: its seed and time to target, or why it fell short."""
    m = result.metrics
    seed = f"seed {m['seed']}: " if m.get("seed") is not None else ""
    if not m.get("target_reached"):
        return f"{seed}{result.message or m['target'] + ' not reached'}"
    return (f"{seed}{m['target']} in {fmt_seconds(m.get('time_to_target_s'))} ({m.get('epochs_to_target', 0):.3g} "
            f"epochs; {fmt_rate(m.get('samples_per_s'))} samples/s)")
