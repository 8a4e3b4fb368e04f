"""The answer at the end of `xpubench run`: a few lines a person acts on.

- per workload, the fastest backend and device here and by how much against the next one: both figures
  and their ratio, from one statistic (work / the median of the process medians), with the 95% interval
  of the two-level bootstrap (results/ratio.py ratio_estimate: worker processes, then the samples inside
  them), or "not significant";
- per language model and test, one line instead (language_models.py: the verdict and every runtime's share
  of the bandwidth bound; the report's advice prints the same line);
- which figures were noisy (processes that disagreed, or a flagged spread);
- which cases did not finish and why;
- where the results file is and the command that makes the report.
"""

from __future__ import annotations

import shlex

import pandas as pd

from xpubench.report.base.frame import ResultSet, backend_label, many_sources, ok_rows, setting
from xpubench.report.sentences.language_models import model_lines, model_rows
from xpubench.report.tables.headline import better, figure_text, headline_rate, rate_groups
from xpubench.report.tables.target import ranking_lines, sweep_lines, target_rows
from xpubench.results.ratio import ratio_estimate

LISTED = 4  # at most this many cases named per line; the rest counted


def _name(row, sources: bool = False) -> str:
    """"torch cpu", "jax gpu:0 x8 bf16"; with ``sources`` (several results files: a fleet's machines)
    "gpu-node: torch gpu:0", the file's label first."""
    devices = int(row["devices"])
    parts = [backend_label(row), str(row["device"]) + (f" x{devices}" if devices > 1 else "")]
    if row.get("precision") != "fp32":
        parts.append(str(row["precision"]))
    return (f"{row['source']}: " if sources else "") + " ".join(parts)


def _comparable(a, b) -> bool:
    return all((pd.isna(a.get(k)) and pd.isna(b.get(k))) or a.get(k) == b.get(k)
               for k in ("batch_size", "size", "users", "rate", "devices"))


def workload_line(data: ResultSet, rows: pd.DataFrame, *, named: bool = False, sources: bool = False) -> str:
    """One workload (and mode) of one file: its fastest case against the fastest other backend/device, both
    figures and their ratio (the interval's point: both come from the median of the process medians,
    results/modes.py ``Rate``); ``named``: the line names the mode (the file holds the workload in several);
    ``sources``: the rows of several files (a fleet's machines), ranked together, each named with its file."""
    rows = rows.assign(_rate=[headline_rate(r) for _, r in rows.iterrows()]).dropna(subset=["_rate"])
    if rows.empty:
        return ""
    rows = rows.sort_values("_rate", ascending=not better(rows.iloc[0]))
    best = rows.iloc[0]
    what = f"{best['workload']} ({best['mode']})" if named else best["workload"]
    what += f" ({best['options_text']})" if best.get("options_text") else ""   # "llama (4/30 layers, pp64, tg16)"
    head = f"{what}: fastest {'' if sources else 'here '}{_name(best, sources)}"
    others = rows[[_name(r, sources) != _name(best, sources) for _, r in rows.iterrows()]]
    if others.empty:
        return f"{head} (the only backend/device measured)"
    same = others[[_comparable(best, r) for _, r in others.iterrows()]]
    other = (same if not same.empty else others).iloc[0]
    figures = f"{figure_text(best, best['_rate'], named=True)} against {figure_text(other, other['_rate'])}"
    ratio = best["_rate"] / other["_rate"] if better(best) else other["_rate"] / best["_rate"]
    if same.empty:
        return (f"{head} ({setting(best)}), {ratio:.2f}x {_name(other, sources)} ({setting(other)}; {figures}: "
                "different settings, no interval)")
    est = ratio_estimate(rate_groups(data, best), rate_groups(data, other))  # time of other / time of best
    where = f" at {setting(best)}" if setting(best) else ""
    if est is None:
        return f"{head}{where}, {ratio:.2f}x {_name(other, sources)} ({figures}; no raw samples: no interval)"
    if not est.significant:
        return (f"{head}{where}, but not significant against {_name(other, sources)} "
                f"({figures}: {est.ratio:.2f}x, 95% interval {est.low:.2f}-{est.high:.2f}: {est.note})")
    note = " (provisional: one process a side)" if est.provisional else ""
    return (f"{head}{where}: {est.ratio:.2f}x as fast as {_name(other, sources)} "
            f"({figures}; 95% interval {est.low:.2f}-{est.high:.2f}){note}")


def _listed(items: list[str]) -> str:
    more = len(items) - LISTED
    return "; ".join(items[:LISTED]) + (f"; and {more} more" if more > 0 else "")


def noisy_line(frame: pd.DataFrame) -> str:
    rows = ok_rows(frame)
    if rows.empty:
        return ""
    items = []
    for _, r in rows.iterrows():
        disagreement = r.get("process_disagreement")
        if isinstance(disagreement, str) and disagreement:
            items.append(f"{r['key']} (processes: {disagreement})")
        elif r.get("noisy"):
            items.append(f"{r['key']} ({str(r.get('warning') or 'samples vary by 10% or more').split('; ')[0]})")
    return "noisy: " + _listed(items) if items else "noisy: none flagged"


def skipped_line(frame: pd.DataFrame) -> str:
    bad = frame[frame["status"] != "ok"]
    if bad.empty:
        return ""
    said: dict[tuple[str, str], list[str]] = {}   # the cases of one status and reason named together, the
    for _, r in bad.iterrows():                    # reason whole: it may end in the command that fixes it
        said.setdefault((str(r["status"]), " ".join(str(r.get("message") or "").split())), []).append(str(r["key"]))
    return "did not finish: " + _listed([f"{', '.join(keys)}: {status}" + (f" ({why})" if why else "")
                                         for (status, why), keys in said.items()])


def answer_lines(data: ResultSet, output=None) -> list[str]:
    """The answer as lines of plain text (see the module docstring)."""
    frame = data.frame
    lines = ["", "Answer:"]
    if not frame.empty:
        rows = ok_rows(frame)
        if not rows.empty:
            rows = rows[~rows.index.isin(target_rows(frame).index)]   # cases with a target: ranked below
            rows = rows[~rows.index.isin(model_rows(frame).index)]    # language models: their own line below
            sources = many_sources(frame)   # a fleet's machines: ranked against each other
            keys = ["workload"] if sources else ["source", "workload"]
            modes = rows.groupby(keys)["mode"].nunique()
            # a line per workload, mode and key options (like with like: report/base/frame.py ``alike``)
            for key, group in rows.groupby([*keys, "mode", "alike"], sort=True):
                mine = key[:len(keys)]
                line = workload_line(data, group, named=modes[mine if len(keys) > 1 else mine[0]] > 1,
                                     sources=sources)
                if line:
                    lines.append("- " + line)
            lines += ["- " + line for line in model_lines(data)]   # with their share of the bandwidth bound
            # time to target: setups ranked with the interval, then what precision / batch size change
            lines += ["- " + line for line in ranking_lines(data) + sweep_lines(data)]
        for line in (noisy_line(frame), skipped_line(frame)):
            if line:
                lines.append("- " + line)
    if output is not None:
        path = shlex.quote(str(output))
        lines.append(f"- results: {output}")
        lines.append("- the report (charts and every table):")
        lines.append(f"  xpubench report {path} -o report.html")
    return lines if len(lines) > 2 else []
