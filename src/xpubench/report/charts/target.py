"""The curve that shows both speed and convergence: the target's metric against wall time, per setup,
every seed a line (the report's chart and compare's; its terminal form is report/tables/target.py terminal_lines)."""

from __future__ import annotations

import numpy as np

from xpubench.report.base.cells import fmt_seconds
from xpubench.report.base.content import Chart
from xpubench.report.base.frame import ResultSet, many_sources, series_label
from xpubench.report.charts.performance import colors, new_figure, plain_text, png
from xpubench.report.tables.target import GROUP, seed_curves, target_rows, terminal_lines
from xpubench.results.targets import parse


def curves_chart(data: ResultSet) -> Chart | None:
    """Per workload and target: the metric after each evaluation against the wall time since training
    began (evaluations on the clock), one colour per setup, one line per seed; the target dashed."""
    rows = target_rows(data.frame)
    rows = rows[[bool(seed_curves(data.result(r))) for _, r in rows.iterrows()]] if not rows.empty else rows
    if rows.empty:
        return None
    groups = list(rows.groupby(GROUP, sort=False))
    fig = new_figure(figsize=(9.0, 3.8 * len(groups)))
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


def compared_curves(matched) -> tuple[list[str], Chart | None]:
    """For `xpubench compare`: the curves (text) and the chart of the matched cases with a target, both
    files' setups side by side (each labelled with its file); ([], None) when none has a target."""
    items = [e for pair in matched for e in pair if e.result.metrics.get("target") and e.result.status == "ok"]
    if not items:
        return [], None
    data = ResultSet.load(items)
    with plain_text():   # drawn only here: matplotlib is imported only where a case has a target
        return terminal_lines(data), curves_chart(data)
