"""Typed results -> one flat pandas DataFrame, one row per case (the one place results become a frame); and
the helpers that pick rows.

Columns: where the row came from (``source``: a short label of its file, ``path``, ``host``), what was
measured (``key``, ``workload``, ``backend``, ``device``, ``device_name``, ``mode``, ``precision``,
``batch_size``, ``size``, ``devices``, ``data``), how it ended (``status``, ``message``, ``placement``,
``duration_s``), the chip's ``memory_bandwidth`` (bytes/s, from the fingerprint; None when unknown) and
how the CPU's fp32 peak was estimated (``cpu_peak_basis``), how busy the machine was (``cpu_busy_at_start``:
other processes' share of the CPU before the run, the fingerprint's; ``load_at_start``: the highest 1-min
load average any of its ok processes started at, against ``usable_cores``; None when unknown), then every
metric of the record under its own name (a metric whose name is already a column is kept as
``metric.<name>``; ``eval_samples`` falls back to the case's setting), and three derived columns:
``timing`` (the name of the case's headline raw samples, e.g. ``step_s``), ``n_samples`` (how many)
and ``noisy`` (the harness flagged the figure, or its samples vary by 10% or more). ``entry`` is the
row's position in :func:`entries` (for its raw samples, curves and gallery). Like with like (issue 52):
``alike`` is what two rows must share to be compared (the case's key options but a backend's own,
workloads.alike), ``options_text`` those options in words ("4/30 layers, pp64, tg16"), ``variant`` what
the backend ran that is not its default ("eager decode": ``Backend.variant``), named with the backend
wherever the row is (``backend_label``).

Columns are typed as the results are (results/loaded_metrics.py): a case's whole numbers (``batch_size``,
``size``, ``devices``) and every figure declared ``int`` are ``Int64`` (a whole number never passes
through a float), every figure declared ``float`` is ``float64``; a figure a row lacks is NA (NaN in a
float column), never a default: ``devices`` is the case's (1 unless it ran on several), ``batch_size``
is there for every model case (the planner resolved it) and NA for a matmul.
"""

from __future__ import annotations

import contextlib
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from xpubench import backends
from xpubench.devices.device import is_cpu
from xpubench.legible.plaintext import shown
from xpubench.results.fold import headline_name, process_groups
from xpubench.results.loaded_metrics import declared, loaded_class
from xpubench.results.modes import MODES, Mode, mode_of
from xpubench.results.schema import Result
from xpubench.workloads import alike, options_text

CASE_COLUMNS = ("workload", "backend", "device", "mode", "precision", "batch_size", "size", "users", "rate", "devices",
                "data")
NOISY_CV = 0.10          # the harness's own rule (results/stats.py CV_WARN)


@dataclass(frozen=True)
class Entry:
    """One result and the file it came from."""

    source: str          # short, unique label of the file (its stem; more of the path when stems clash)
    path: Path
    result: Result


def source_labels(paths: list[Path]) -> list[str]:
    """File stems, lengthened with parent folders until every label is unique; a file given twice gets
    " #2" (comparing a file with itself is a fair check)."""
    paths = [Path(p) for p in paths]
    labels = [str(p) for p in paths]
    for depth in range(1, 8):
        short = ["/".join(p.with_suffix("").parts[-depth:]) for p in paths]
        if len(set(short)) == len(set(paths)):
            labels = short
            break
    seen: dict[str, int] = {}
    for i, label in enumerate(labels):
        seen[label] = seen.get(label, 0) + 1
        labels[i] = label if seen[label] == 1 else f"{label} #{seen[label]}"
    return labels


def entries(loaded) -> list[Entry]:
    """store.LoadedFile list (or one LoadedFile, or a bare list of Result or Entry) -> Entry list."""
    if hasattr(loaded, "results"):
        loaded = [loaded]
    loaded = list(loaded)
    if loaded and isinstance(loaded[0], Entry):
        return loaded
    if loaded and isinstance(loaded[0], Result):
        return [Entry("results", Path("results"), r) for r in loaded]
    labels = source_labels([f.path for f in loaded])
    return [Entry(label, Path(f.path), r) for label, f in zip(labels, loaded) for r in f.results]


def timing_name(result: Result) -> str | None:
    """The raw samples that carry the case's headline time (its mode's ``samples``, results/modes.py)."""
    return headline_name(result)


def timing_samples(result: Result) -> np.ndarray:
    name = timing_name(result)
    values = [v for v in result.samples.get(name, []) if v is not None] if name else []
    return np.asarray(values, dtype=np.float64)


def device_name(result: Result) -> str | None:
    """The chip's name as the fingerprint recorded it ("NVIDIA H100 80GB HBM3", "AMD EPYC"), or None."""
    fp = result.fingerprint or {}
    name = device_record(result).get("name")
    if name is None and is_cpu(result.case.device):   # this host's CPU (a remote server's machine: unknown)
        return ((fp.get("host") or {}).get("cpu") or {}).get("model")
    return name


def device_record(result: Result) -> dict:
    """The case's device record in its fingerprint (a Keras case's: its framework's, backends/peaks.py);
    {} for a backend this xpubench has no record of (a file from another version still reports)."""
    from xpubench.backends.peaks import device_record as record

    fp = result.fingerprint or {}
    try:
        return record({"backends": fp.get("backends") or {}}, result.case.backend, result.case.device)
    except KeyError:   # backends.get: no record of that backend name here
        return {}


def _dig(record: Any, *keys: str) -> Any:
    """``record[k1][k2]...``, None where a level is missing or not a mapping."""
    for key in keys:
        record = record.get(key) if isinstance(record, dict) else None
    return record


def _flat(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _noisy(result: Result, samples: np.ndarray) -> bool:
    if result.metrics.get("warning"):
        return True
    if samples.size >= 2 and samples.mean() > 0:
        return bool(samples.std(ddof=1) / samples.mean() >= NOISY_CV)
    return False


def variant(result: Result) -> str | None:
    """What the result's backend ran that is not its default ("eager decode": ``Backend.variant``): the
    decode step the result records, else (a case that did not finish) the one its case asked for."""
    record, given = backends.record(result.case.backend), result.case.options
    asked = next((given[k] for k in record.honours if k in given), None)
    return record.variant(result.metrics.get("decode_step") or asked)


def row_of(entry: Entry, position: int) -> dict[str, Any]:
    r, c = entry.result, entry.result.case
    fp = r.fingerprint or {}
    samples = timing_samples(r)
    row: dict[str, Any] = {
        "entry": position, "source": entry.source, "path": str(entry.path),
        "host": fp.get("hostname") or (fp.get("host") or {}).get("hostname"),
        "key": r.key,
    }
    for name in CASE_COLUMNS:
        row[name] = getattr(c, name)
    row.update(alike=alike(c), options_text=options_text(c), variant=variant(r))
    row["device_name"] = device_name(r)
    row["memory_bandwidth"] = device_record(r).get("memory_bandwidth")  # bytes/s of the chip, or None
    row["cpu_peak_basis"] = _dig(fp, "host", "cpu", "peak_estimate", "fp32", "basis")  # or None
    row["cpu_busy_at_start"] = fp.get("cpu_busy_at_start")   # other processes' share before the run (or None)
    row["usable_cores"] = _dig(fp, "host", "cpu", "usable_cores")
    loads = [run.machine.get("load_1m_start") for run in r.ok_runs]
    row["load_at_start"] = max((v for v in loads if isinstance(v, (int, float))), default=None)   # the busiest
    row.update(status=r.status, message=r.message, placement=r.placement, started_at=r.started_at,
               duration_s=r.duration_s, timing=timing_name(r), n_samples=int(samples.size),
               noisy=_noisy(r, samples) if r.status == "ok" else None)
    for metric, value in r.metrics.items():
        row[f"metric.{metric}" if metric in row else metric] = _flat(value)
    row.setdefault("eval_samples", c.eval_samples)  # the case's setting where the metrics lack it
    row.setdefault("target", c.options.get("target"))   # a quality target, as asked (not run)
    return {k: shown(v) if isinstance(v, str) else v for k, v in row.items()}   # text from files: printable


@functools.cache
def column_types() -> dict[str, str]:
    """{column: pandas dtype} of the typed columns: the case's whole numbers, and each figure every mode that
    declares it declares ``int`` (Int64) or ``float`` (float64)."""
    kinds: dict[str, set[type]] = {}
    for name in (*MODES, None):
        for figure, kind in declared(loaded_class(name)).items():
            kinds.setdefault(figure, set()).add(kind)
    types = {f: {int: "Int64", float: "float64"}.get(k.pop()) for f, k in kinds.items() if len(k) == 1}
    whole = dict.fromkeys(("batch_size", "size", "users", "devices"), "Int64")
    return {**{f: t for f, t in types.items() if t}, **whole, "rate": "float64"}


def results_frame(loaded) -> pd.DataFrame:
    """One row per case, flat columns typed as the results are (see the module docstring). Accepts what
    analysis.load returns."""
    rows = [row_of(e, i) for i, e in enumerate(entries(loaded))]
    frame = pd.DataFrame(rows)
    types = column_types()
    for col in frame.columns:   # a figure renamed beside a column of the same name (metric.devices): its own type
        if dtype := types.get(col, types.get(col.removeprefix("metric."))):
            with contextlib.suppress(TypeError, ValueError):   # a value of another kind (an older file's): as given
                frame[col] = pd.array([r.get(col) for r in rows], dtype=dtype)   # whole numbers exact, absent NA
    return frame.copy()   # one block per type again: a column set one by one leaves pandas' warning to the tables


@dataclass
class ResultSet:
    """The entries and their frame together: the frame for selecting, the entries for raw data."""

    items: list[Entry]
    frame: pd.DataFrame

    @classmethod
    def load(cls, loaded) -> ResultSet:
        items = entries(loaded)
        return cls(items, results_frame(items))

    def result(self, row) -> Result:
        return self.items[int(row["entry"])].result

    def samples(self, row) -> np.ndarray:
        return timing_samples(self.result(row))

    def groups(self, row) -> list[np.ndarray]:
        """The headline samples of each of the row's ok worker processes (results/ratio.py ratio_estimate's input)."""
        return [np.asarray(g, dtype=np.float64) for g in process_groups(self.result(row))]


def series_label(row, *, with_source: bool, with_precision: bool = True, with_batch: bool = False) -> str:
    """How a row is named in a legend: "jax cpu", "torch gpu:0 bf16", "torch cpu [run-a]"."""
    parts = [backend_label(row), str(row["device"])]
    if row.get("devices") and int(row["devices"]) > 1:
        parts[-1] += f" x{int(row['devices'])}"
    if with_precision and row.get("precision") != "fp32":
        parts.append(str(row["precision"]))
    if with_batch and pd.notna(row.get("batch_size")):
        parts.append(f"b{int(row['batch_size'])}")
    label = " ".join(parts)
    return f"{label} [{row['source']}]" if with_source else label


def backend_label(row) -> str:
    """The backend and, where it ran a variant other than its default, that variant: "torch (eager decode)"."""
    variant = row.get("variant")
    return f"{row['backend']} ({variant})" if isinstance(variant, str) and variant else str(row["backend"])


def num(row, name: str | None):
    """A figure of a row (a frame row, or a dict of case fields and metrics): None when the row, the name or
    the value is missing (NaN and pandas' NA included). Every table cell reads its figures through it."""
    if row is None or name is None:
        return None
    value = row.get(name)
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    return value


def row_mode(row) -> Mode | None:
    """The record of a row's mode (results/modes.py), None for a mode nobody declared."""
    return mode_of(row.get("mode"))


def measured_at(row) -> int | None:
    """What a case is measured at: its mode's ``size`` field (matmul's N, every other mode's batch size), as the
    planner resolved it; None for a mode no record declares that has no batch size."""
    mode = row_mode(row)
    return num(row, mode.size if mode else "batch_size")


def measured_at_column(rows: pd.DataFrame) -> pd.Series:
    """``measured_at`` of every row, as a column to sort and group by (whole numbers, NA where unknown)."""
    return pd.Series(pd.array([measured_at(r) for _, r in rows.iterrows()], dtype="Int64"), index=rows.index)


def setting(row, *, short: bool = False) -> str:
    """What a case is measured at, as its mode names it: "N=1024", "batch 32" ("b32" when ``short``);
    "" when the row has no such figure."""
    mode = row_mode(row)
    text = mode.size_text if mode else ("batch {}", "b{}")
    value = measured_at(row)
    return "" if value is None else text[1 if short else 0].format(int(value))


@functools.cache
def own_measurements() -> frozenset[str]:
    """The registered workloads that are their own measurement (their record's ``run``: the selftest, an
    isolation check), not a benchmark: no table, chart or summary ranks them."""
    from xpubench.workloads import REGISTRY, get_workload

    return frozenset(name for name in REGISTRY if get_workload(name).run is not None)


def benchmarks(frame: pd.DataFrame) -> pd.Series:
    """Per row: whether its workload is a benchmark (not one of ``own_measurements``)."""
    return ~frame["workload"].isin(own_measurements())


def ok_rows(frame: pd.DataFrame, mode: str | None = None) -> pd.DataFrame:
    """The rows that finished ok (of one mode: "matmul", "train", "infer"), own measurements left out."""
    if frame.empty:
        return frame
    keep = (frame["status"] == "ok") & benchmarks(frame)
    if mode is not None:
        keep &= frame["mode"] == mode
    return frame[keep]


def many_sources(frame: pd.DataFrame) -> bool:
    return not frame.empty and frame["source"].nunique() > 1


def column(frame: pd.DataFrame, name: str) -> pd.Series:
    """A metric column, or all-missing when no row has that metric."""
    if name in frame.columns:
        return pd.to_numeric(frame[name], errors="coerce")
    return pd.Series(np.nan, index=frame.index)
