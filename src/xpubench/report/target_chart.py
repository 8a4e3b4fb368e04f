"""The curve that shows both speed and convergence: the target's metric against wall time, per setup,
every seed a line (reports: a chart; terminal: a line of points per setup)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from xpubench.report.charts import colors, png
from xpubench.report.content import Chart
from xpubench.report.frame import ResultSet, many_sources, series_label
from xpubench.report.tables import fmt_seconds
from xpubench.report.target import GROUP, target_rows
from xpubench.targets import parse

TERMINAL_POINTS = 6   # evaluation points per setup in the terminal (the last one always shown)


def seed_curves(result) -> list[tuple[int | None, list[float], list[float | None]]]:
    """(seed, wall seconds, metric values) of each ok seed's evaluations."""
    out = []
    for run in result.ok_runs or [result]:
        wall, value = run.series.get("target_wall_s") or [], run.series.get("target_value") or []
        if wall:
            out.append((run.metrics.get("seed"), list(wall), list(value)))
    return out


def curves_chart(data: ResultSet) -> Chart | None:
    """Per workload and target: the metric after each evaluation against the wall time since training
    began (evaluations on the clock), one colour per setup, one line per seed; the target dashed."""
    rows = target_rows(data.frame)
    rows = rows[[bool(seed_curves(data.result(r))) for _, r in rows.iterrows()]] if not rows.empty else rows
    if rows.empty:
        return None
    groups = list(rows.groupby(GROUP, sort=False))
    fig = Figure(figsize=(9.0, 3.8 * len(groups)))
    multi = many_sources(rows)
    for i, ((_, workload, target_text), group) in enumerate(groups):
        ax = fig.add_subplot(len(groups), 1, i + 1)
        labels = [series_label(r, with_source=multi, with_batch=group["batch_size"].nunique() > 1)
                  for _, r in group.iterrows()]
        palette = colors(labels)
        for label, (_, r) in zip(labels, group.iterrows()):
            for k, (_, wall, value) in enumerate(seed_curves(data.result(r))):
                y = [np.nan if v is None else v for v in value]
                ax.plot(wall, y, "o-", ms=2.5, lw=1, alpha=0.75, color=palette[label],
                        label=f"{label}: {_time(r)}" if k == 0 else None)
        target = parse(target_text)
        ax.axhline(target.value, ls="--", lw=1, color="#444444", label=f"target {target}")
        ax.set_title(f"{workload}: {target.metric} against wall time (one line per seed)")
        ax.set_xlabel("seconds since the first training step (evaluations included)")
        ax.set_ylabel(f"validation {target.metric}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return Chart("time_to_target", "The metric against wall time", (
        "Each line is one seed (one worker process): the validation metric after every evaluation, at the "
        "wall time since its first training step (set-up and compile off the clock, evaluations on it). "
        "Where a line crosses the dashed target is its time to target; the legend gives each setup's "
        "trimmed mean over its seeds."), png(fig))


def _time(row) -> str:
    if not row.get("target_reached"):
        return "not reached"
    return fmt_seconds(row.get("time_to_target_s"))


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


def compared_curves(matched) -> tuple[list[str], Chart | None]:
    """For `xpubench compare`: the curves (text) and the chart of the matched cases with a target, both
    files' setups side by side (each labelled with its file); ([], None) when none has a target."""
    items = [e for pair in matched for e in pair if e.result.metrics.get("target") and e.result.status == "ok"]
    if not items:
        return [], None
    data = ResultSet.load(items)
    return terminal_lines(data), curves_chart(data)
