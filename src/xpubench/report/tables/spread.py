"""How far to trust each figure, for the report (report/sections.py lists them): the spread of every
headline figure at both levels (samples inside a worker process, the processes against each other) and
the processes that disagreed with what the machine was doing around each. DataFrames of formatted
strings; a figure the harness flagged as noisy ends in content.NOISY_MARK.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from xpubench.report.base.cells import fmt_seconds, noisy, pct
from xpubench.report.base.frame import ResultSet, many_sources, num, ok_rows
from xpubench.results.fold import statistic_samples


def spread_table(data: ResultSet) -> pd.DataFrame:
    """Every headline figure with its spread at both levels: the figure (median of the worker processes'
    medians), the samples' spread inside a process (median IQR / median), the processes' spread
    (range of their medians / the figure), the two-level 95% interval and the harness's warning."""
    rows = ok_rows(data.frame)
    rows = rows[rows["timing"].notna()] if not rows.empty else rows
    multi = many_sources(rows)
    out = []
    for _, r in rows.iterrows():
        groups = data.groups(r)
        within = [(np.percentile(g, 75) - np.percentile(g, 25)) / np.median(g) for g in groups if np.median(g)]
        pm = [float(np.median(g)) for g in groups]
        median = num(r, r["timing"])
        lo, hi = _ci(r)
        out.append({**({"file": r["source"]} if multi else {}), "case": r["key"], "timing": r["timing"],
                    "processes x samples": f"{len(groups)} x {round(np.mean([g.size for g in groups]))}"
                    if groups else "0",
                    "median": fmt_seconds(median),
                    "IQR in a process": f"{np.median(within):.1%}" if within else "n/a",
                    "across processes": f"{(max(pm) - min(pm)) / median:.1%}" if len(pm) > 1 and median else "n/a",
                    "95% CI": f"{fmt_seconds(lo)} - {fmt_seconds(hi)}" if lo is not None else "n/a",
                    "flag": noisy(r, str(num(r, "warning") or "ok"))})
    return pd.DataFrame(out)


def disagreement_table(data: ResultSet) -> pd.DataFrame:
    """The worker processes of every case whose processes disagreed far more than their own samples
    ("bimodal", "machine state changed"), each with what the machine was doing around it."""
    rows = ok_rows(data.frame)
    if rows.empty or "process_disagreement" not in rows.columns:
        return pd.DataFrame()
    multi = many_sources(rows)
    out = []
    for _, r in rows[rows["process_disagreement"].notna()].iterrows():
        for run in data.result(r).ok_runs:
            samples = statistic_samples(run, r["timing"])   # as the figure reads them (a round's mean step)
            m = run.machine or {}
            out.append({**({"file": r["source"]} if multi else {}), "case": r["key"],
                        "disagreement": str(r["process_disagreement"]),
                        "process": f"{run.process + 1} of {run.processes}",
                        "median": fmt_seconds(float(np.median(samples)) if samples else None),
                        "load (1 min) start / end": f"{_opt(m.get('load_1m_start'))} / {_opt(m.get('load_1m_end'))}",
                        "CPU MHz start / end": f"{_opt(m.get('cpu_mhz_start'), ',.0f')} / "
                                               f"{_opt(m.get('cpu_mhz_end'), ',.0f')}",
                        "steal": pct(m.get("steal_fraction")), "machine busy": pct(m.get("busy_fraction"))})
    return pd.DataFrame(out)


def _opt(value, spec: str = ".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def _ci(r):
    """The two-level 95% interval of the row's headline time (``<timing>_ci95_low_s`` / ``_high_s``,
    results/fold.py), (None, None) where its mode declares none for these samples."""
    prefix = str(r["timing"])[:-2]
    lo, hi = num(r, f"{prefix}_ci95_low_s"), num(r, f"{prefix}_ci95_high_s")
    return (lo, hi) if lo is not None and hi is not None else (None, None)
