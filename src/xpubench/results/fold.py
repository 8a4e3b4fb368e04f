"""A case's worker processes folded into one Result, the figure a report shows.

With one process the Result is that process's run, field for field, its rates derived as below (files
written before processes were repeated read as before; one written before the generation loop recorded
the rounds' statistic gets its decode time from its rounds). With several:
- status: "ok" when at least one process ended ok; then every figure comes from the ok processes and a
  warning names the ones that did not. With none ok, the first failure's status and message.
- metrics: each number is the median over the ok processes of that process's own figure (whole
  numbers: the lower median, a value that occurred); other values are kept when the processes agree, else
  the first process's. The headline time (its mode's ``samples``, results/modes.py) is the median of the
  process medians, its 95% interval a bootstrap over both levels (results/stats.py two_level), and these are added:
  ``processes``, ``process_between_spread`` and ``process_within_spread`` (the two levels' spread),
  ``process_disagreement`` ("bimodal", "machine state changed" or None) and its sentence in ``warning``.
- rates (any number of processes): each of its mode's ``rates`` is derived again from the case's time,
  work / time (samples/s = global batch / step_s, FLOP/s = FLOPs / warm_s, decode tok/s = batch /
  decode_token_s), and the rates that scale with it (tokens/s, achieved FLOP/s) kept at their multiple of
  it: a median of rates is not the rate of the median time (two processes: the mean of two rates against
  the mean of two times), and the shown figure, the ratio and the winner must come from one statistic.
- samples a mode records step by step in rounds (generation's decode steps, ``Mode.rounds``): the
  statistic reads each round's mean step (``statistic_samples``), the figure its median over rounds.
- samples: each ok process's samples one after the other (``runs`` keeps them apart); series, artifacts
  and placement: the first ok process's.
- a case with a quality target (``metrics["target"]``): each process is one seed, and its time to target
  is MLPerf's trimmed mean over them with a bootstrap interval (``fold_target``, results/target_stats.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

import numpy as np

from xpubench.results.loaded_metrics import loaded_metrics
from xpubench.results.modes import Mode, mode_of
from xpubench.results.schema import CaseReader, Result, Run, retryable, typed_case
from xpubench.results.stats import two_level
from xpubench.results.target_stats import fold, status
from xpubench.results.targets import parse


def headline_name(runs_or_result) -> str | None:
    """The headline sample name of a Run or Result: the first of its mode's ``samples`` (results/modes.py)
    it holds samples of; None when it holds none, or its mode has no record. The metrics of a headline
    ``<name>_s`` are ``<name>_s`` (median), ``<name>_ci95_low_s`` and ``<name>_ci95_high_s``."""
    mode = mode_of(runs_or_result.mode)
    return mode.sample_name(runs_or_result.samples) if mode else None


def statistic_samples(run, name: str) -> list[float]:
    """A process's (a Run's, or a Result's) samples of ``name`` as the case's statistic reads them: where its
    mode records them step by step in the result's ``rounds`` equal runs (``Mode.rounds``: generation's
    decode steps), each round's mean step; else as recorded."""
    values = [v for v in run.samples.get(name) or [] if v is not None]
    mode, rounds = mode_of(run.mode), run.metrics.get("rounds")
    if mode and name in mode.rounds and isinstance(rounds, int) and 0 < rounds < len(values):
        return [float(np.mean(steps)) for steps in np.array_split(values, rounds)]
    return values


def process_groups(result: Result, name: str | None = None) -> list[list[float]]:
    """The headline samples (or ``name``'s) of each ok process as the statistic reads them
    (``statistic_samples``), one list per process."""
    name = name or headline_name(result)
    if name is None:
        return []
    runs = result.ok_runs or ([result] if result.status == "ok" else [])
    return [statistic_samples(r, name) for r in runs if r.samples.get(name)]


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _merge(values: list):
    numbers = [v for v in values if v is not None]
    if numbers and all(_is_number(v) for v in numbers):
        if all(isinstance(v, int) for v in numbers):
            return statistics.median_low(numbers)
        return float(statistics.median(numbers))
    if all(v == values[0] for v in values):
        return values[0]
    return next((v for v in values if v is not None), None)


def _merged_metrics(runs: list[Run]) -> dict:
    keys = list(dict.fromkeys(k for r in runs for k in r.metrics))
    out = {k: _merge([r.metrics.get(k) for r in runs]) for k in keys}
    warnings = list(dict.fromkeys(r.metrics.get("warning") for r in runs if r.metrics.get("warning")))
    out["warning"] = "; ".join(warnings) or None
    return out


def _headline_time(metrics: dict, ok: list[Run], name: str):
    """The case's headline time and its interval over both levels (results/stats.py two_level) into
    ``metrics``; the TwoLevel, or None without samples."""
    groups = [statistic_samples(r, name) for r in ok if r.samples.get(name)]
    if not groups:
        return None
    tl = two_level(groups)
    prefix = name[:-2]
    metrics[name] = tl.median
    if f"{prefix}_ci95_low_s" in metrics:
        metrics[f"{prefix}_ci95_low_s"], metrics[f"{prefix}_ci95_high_s"] = tl.ci95_low, tl.ci95_high
    return tl


def _add_two_level(metrics: dict, ok: list[Run], name: str) -> None:
    tl = _headline_time(metrics, ok, name)
    if tl is None:
        return
    metrics.update(processes=tl.processes, process_between_spread=tl.between_spread,
                   process_within_spread=tl.within_spread, process_disagreement=tl.disagreement)
    if tl.note:
        metrics["warning"] = "; ".join(w for w in (metrics.get("warning"), tl.note) if w)


def _positive(value) -> bool:
    return _is_number(value) and math.isfinite(value) and value > 0


def derive_rates(metrics: dict, mode: Mode | None) -> dict:
    """Each of the mode's ``rates`` as work / the case's time (module docstring), in place; a rate whose time
    or work is not recorded is left as it is. Returns ``metrics``."""
    for rate in mode.rates if mode else ():
        time, work = metrics.get(rate.time), [metrics.get(w) for w in rate.work]
        if not _positive(time) or not all(_positive(w) for w in work):
            continue
        old, new = metrics.get(rate.metric), math.prod(work) / time
        for name in rate.scaled:
            if _positive(old) and _is_number(metrics.get(name)):
                metrics[name] = metrics[name] * new / old
        metrics[rate.metric] = new
    return metrics


def aggregate(runs: list[Run], read: CaseReader | None = None) -> Result:
    """One case's runs (in the order they ran) -> its Result (see the module docstring), typed: its Case
    read from the first line (``schema.typed_case``: ``read`` is the planner's reading, which migrates an
    older line), its figures its mode's (results/loaded_metrics.py)."""
    if not runs:
        raise ValueError("a case needs at least one run")
    first = runs[0]
    case = typed_case(first, read)
    mode = mode_of(case.mode)
    if len(runs) == 1:
        fields = {k: getattr(first, k) for k in ("status", "message", "samples", "series", "artifacts",
                                                 "placement", "fingerprint", "started_at", "duration_s")}
        metrics = dict(first.metrics)
        name = headline_name(first) if first.status == "ok" else None
        if name and name in mode.rounds:   # read from the rounds, as a file before the loop recorded them needs
            _headline_time(metrics, [first], name)
        if first.status == "ok":
            derive_rates(metrics, mode)
        return fold_target(Result(**fields, case=case, metrics=loaded_metrics(case.mode, metrics), runs=[first]))
    ok = [r for r in runs if r.status == "ok"]
    bad = [r for r in runs if r.status != "ok"]
    base = ok[0] if ok else bad[0]
    failures = "; ".join(f"process {r.process + 1} of {r.processes}: {r.status}" + (f": {r.message}" if r.message
                                                                                     else "") for r in bad)
    if ok:
        metrics = _merged_metrics(ok)
        name = headline_name(ok[0])
        if name:
            _add_two_level(metrics, ok, name)
        derive_rates(metrics, mode)
        if bad:
            note = f"{len(bad)} of {len(runs)} processes did not end ok ({failures}); figures from the other {len(ok)}"
            metrics["warning"] = "; ".join(w for w in (metrics.get("warning"), note) if w)
        status, message = "ok", (f"{len(bad)} of {len(runs)} processes did not end ok: {failures}" if bad else "")
        samples: dict[str, list[float]] = {}
        for r in ok:
            for k, v in r.samples.items():
                samples.setdefault(k, []).extend(v)
    else:
        metrics, samples = dict(base.metrics), dict(base.samples)
        status, message = base.status, failures if len(bad) > 1 else base.message
    durations = [r.duration_s for r in runs if r.duration_s is not None]
    return fold_target(Result(case=case, status=status, message=message, metrics=loaded_metrics(case.mode, metrics),
                              samples=samples, series=base.series, artifacts=base.artifacts, placement=base.placement,
                              fingerprint=first.fingerprint, started_at=first.started_at,
                              duration_s=round(sum(durations), 3) if durations else None, runs=list(runs)))


def fold_target(result: Result) -> Result:
    """A case with a quality target: its seeds' times folded into the case's (results/target_stats.py:
    MLPerf's trimmed mean, its bootstrap interval, seeds that reached it); any other case unchanged."""
    ok = result.ok_runs
    if result.status != "ok" or not ok or not ok[0].metrics.get("target"):
        return result
    result.metrics.update(fold([r.metrics for r in ok], parse(ok[0].metrics["target"])))
    if not result.metrics["target_reached"]:
        note = status(result.metrics)
        result.message = "; ".join(m for m in (result.message, f"target {ok[0].metrics['target']} {note}") if m)
    return result


def _case_id(run: Run) -> str:
    return run.case.get("run_id") or run.case.get("key") or str(id(run))


def unique_runs(runs: Iterable[Run]) -> tuple[list[Run], str | None]:
    """Each process of each case once. A record repeating a (case, process) already seen (a file
    concatenated with itself or with another run of the same plan) replaces the earlier one, so no
    process is counted twice and no interval looks surer than it is; returns the runs in order and a
    sentence saying how many were replaced (None when none were). A case retried by ``--resume`` after
    bad input (``retryable``) replaces its failed records without a word: that is what the retry is for."""
    kept: dict[tuple[str, int], Run] = {}
    replaced = 0
    for run in runs:
        slot = (_case_id(run), run.process)
        if slot in kept and not retryable(kept[slot]):
            replaced += 1
        kept.pop(slot, None)
        kept[slot] = run
    said = (f"{replaced} record(s) repeat a case's process already read (same run_id and process index); the "
            "later record of each is kept, so no process is counted twice") if replaced else None
    return list(kept.values()), said


def aggregate_all(runs: Iterable[Run], read: CaseReader | None = None) -> list[Result]:
    """Every case of a file (or a run) in the order its first process appeared, each process once
    (``unique_runs``), typed (``aggregate``). Nothing is derived here: analysis.analyse adds peak, ceiling
    and scaling figures."""
    groups: dict[str, list[Run]] = {}
    for run in unique_runs(runs)[0]:
        groups.setdefault(_case_id(run), []).append(run)
    return [aggregate(g, read) for g in groups.values()]
