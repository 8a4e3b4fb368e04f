"""How far to trust each figure, for the report (report/sections.py lists them): the spread of every
headline figure at both levels (samples inside a worker process, the processes against each other) and
the processes that disagreed with what the machine was doing around each. DataFrames of formatted
strings; a figure the harness flagged as noisy ends in content.NOISY_MARK.
"""

from __future__ import annotations

import re

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
                    "flag": noisy(r, flag(data.result(r), str(num(r, "warning") or "")) or "ok")})
    return pd.DataFrame(out)


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def flag(result, warning: str) -> str:
    """The case's warnings, each said once: one its worker processes each raised (the same words, their own
    figures) reads "unstable: stdev is 12-21% of the mean (>= 10%), in processes 1, 3 of 3"; the case's own
    (the processes' disagreement, those that did not end ok) as they are."""
    runs = result.ok_runs
    said: dict[str, list[tuple[int, str]]] = {}   # the words without their figures -> (process, text)
    for run in runs if len(runs) > 1 else ():
        for part in _parts(run.metrics.get("warning")):
            said.setdefault(_NUMBER.sub("#", part), []).append((run.process, part))
    own = [part for part in _parts(warning) if _NUMBER.sub("#", part) not in said]
    shared = [f"{_spanned([text for _, text in whose])}, {_which([p for p, _ in whose], len(result.runs))}"
              for whose in said.values()]
    return "; ".join(shared + own)


def _parts(warning) -> list[str]:
    return list(dict.fromkeys(p.strip() for p in str(warning or "").split("; ") if p.strip()))


def _spanned(texts: list[str]) -> str:
    """Texts alike but for their figures as one, each figure that differs as its range: 12-21%."""
    figures = [_NUMBER.findall(t) for t in texts]

    def value(text: str) -> float:
        return float(text.replace(",", ""))

    spans = iter([f[0] if len(set(f)) == 1 else f"{min(f, key=value)}-{max(f, key=value)}" for f in zip(*figures)])
    return _NUMBER.sub(lambda _: next(spans), texts[0])


def _which(processes: list[int], total: int) -> str:
    if len(set(processes)) == total:
        return f"in each of the {total} processes"
    numbers = sorted({p + 1 for p in processes})
    return f"in process{'es' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))} of {total}"


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
