"""Hourly weather series (Jena-climate style CSV) for sequence-to-sequence regression.

The CSV's first column is a date-time, every other column a numeric signal. ``DIR`` may be the CSV
(or a .zip holding one CSV), or a folder: ``DIR/weather/``, ``DIR/jena_climate/`` and ``DIR`` are
searched for ``jena_climate_2009_2016.csv`` (or its .zip), else for one ``*.csv``. With download
allowed and none found, the Jena climate zip is downloaded into ``DIR/weather/``.

- Rows more frequent than hourly (Jena records every 10 minutes) are thinned to one an hour, starting
  at the first row on a full hour; when the time stamps cannot be read the rows are taken as hourly.
- The first 80% of the hours train, the last 20% test. Every signal is min-max scaled with the
  training part's minimum and maximum (a constant signal becomes 0) and clipped to [0, 1].
- Inputs: all signals, windows of T = spec.input_shape[0] hours, a window starting every T // 8 hours
  (windows overlap; train and test windows never share an hour). Targets: the target columns (the
  first three signals unless ``targets=[...]`` names others) 24 hours after each input step, shape
  (T, len(targets)), float32 in [0, 1].
The number of signals is what the file has (the Jena file has 14); the Dataset reports its shapes.
"""

from __future__ import annotations

import warnings
import zipfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from xpubench.data import download as dl
from xpubench.data.core import Dataset, candidate_dirs, check_options, find_one, seq_len, split_point
from xpubench.errors import UserError

if TYPE_CHECKING:
    from xpubench.workloads.base import WorkloadSpec

HORIZON = 24
TEST_FRACTION = 0.2
DEFAULT_TARGETS = 3
JENA_CSV = "jena_climate_2009_2016.csv"
JENA_ZIP = JENA_CSV + ".zip"
JENA_TIME_FORMAT = "%d.%m.%Y %H:%M:%S"


def _find_csv(root: Path) -> Path | None:
    if root.is_file():
        return root
    for folder in candidate_dirs(root, ("weather", "jena_climate")):
        found = find_one(folder, (JENA_CSV, JENA_ZIP))
        if found is not None:
            return found
        csvs = sorted(folder.glob("*.csv"))
        if len(csvs) > 1:
            raise UserError(f"{folder} holds several CSV files ({', '.join(p.name for p in csvs)}); "
                            f"pass the one to use as --data-dir")
        if csvs:
            return csvs[0]
    return None


def read_table(path: Path) -> pd.DataFrame:
    """The CSV (or the one CSV inside a .zip) as a DataFrame; unreadable -> UserError."""
    try:
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as zf:
                members = [n for n in zf.namelist() if n.endswith(".csv") and not n.startswith("__MACOSX")]
                if len(members) != 1:
                    raise UserError(f"{path} must hold exactly one .csv file, it holds {len(members)}")
                with zf.open(members[0]) as fh:
                    return _read_csv(fh, path)
        with path.open("rb") as fh:
            return _read_csv(fh, path)
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise UserError(f"cannot read {path} ({exc}); download it again") from None


def _read_csv(fh: IO[bytes], path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(fh)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"{path} is not a readable CSV file ({msg})") from None


def _hourly_step(stamps: pd.Series) -> tuple[int, int, str]:
    """(offset, step) that thin the rows to one an hour, and a note on how they were found."""
    head = stamps.iloc[:200].astype(str)
    parsed = pd.to_datetime(head, format=JENA_TIME_FORMAT, errors="coerce")
    if parsed.isna().all():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parsed = pd.to_datetime(head, errors="coerce")
    parsed = parsed.dropna()
    if len(parsed) < 2:
        return 0, 1, "time stamps not read: rows taken as hourly"
    diffs = parsed.diff().dropna().dt.total_seconds()
    seconds = float(np.median(diffs))
    if seconds <= 0 or seconds >= 3600 or 3600 % seconds:
        return 0, 1, f"rows every {seconds / 3600:g} h, used as they are"
    step = int(3600 // seconds)
    on_hour = np.flatnonzero((parsed.dt.minute == 0) & (parsed.dt.second == 0))
    offset = int(parsed.index[on_hour[0]]) if len(on_hour) and parsed.index[on_hour[0]] < step else 0
    return offset, step, f"rows every {seconds / 60:g} min thinned to hourly"


def _signals(df: pd.DataFrame, path: Path) -> pd.DataFrame:
    if df.shape[1] < 2:
        raise UserError(f"{path} has {df.shape[1]} column(s): "
                        f"expected a date-time column and numeric signals")
    signals = df.iloc[:, 1:]
    for name in signals.columns:
        col = signals[name]
        if not pd.api.types.is_numeric_dtype(col):
            bad = col[pd.to_numeric(col, errors="coerce").isna() & col.notna()]
            example = repr(bad.iloc[0]) if len(bad) else "a non-number"
            raise UserError(f"{path}: column {name!r} is not numeric (e.g. {example} in line "
                            f"{int(bad.index[0]) + 2 if len(bad) else '?'}); fix or remove that column")
        if col.isna().any():
            row = int(np.flatnonzero(col.isna().to_numpy())[0]) + 2
            raise UserError(f"{path}: column {name!r} has {int(col.isna().sum())} missing value(s), "
                            f"the first in line {row}; fill them in")
    return signals


def _windows(values: np.ndarray, targets: np.ndarray, length: int, stride: int) -> tuple[np.ndarray, ...]:
    starts = np.arange(0, len(values) - length - HORIZON + 1, stride)
    x = np.lib.stride_tricks.sliding_window_view(values, length, axis=0)[starts]
    y = np.lib.stride_tricks.sliding_window_view(targets[HORIZON:], length, axis=0)[starts]
    return (np.ascontiguousarray(x.transpose(0, 2, 1), dtype=np.float32),
            np.ascontiguousarray(y.transpose(0, 2, 1), dtype=np.float32))


def load_weather(spec: WorkloadSpec, root: Path, *, download: bool, train_samples: int | None = None,
                 eval_samples: int | None = None, targets: list[str] | None = None,
                 **options: Any) -> Dataset:
    """Windows (N, T, F) of scaled signals and (N, T, targets) of the targets 24 hours ahead."""
    check_options(options, (), "weather")
    length = seq_len(spec, "weather")
    path = _find_csv(root)
    if path is None:
        if not download:
            raise UserError(f"no weather CSV in {root}: put {JENA_CSV} (or its .zip, or another CSV) there "
                            f"or pass the file as --data-dir, or add --download when online")
        path = dl.download_published("weather", [JENA_ZIP], root / "weather")[0]
    status = dl.verify(path, "weather")
    df = read_table(path)
    signals = _signals(df, path)
    if targets is None:
        targets = [str(c) for c in signals.columns[:DEFAULT_TARGETS]]
    if isinstance(targets, str) or not targets:
        raise UserError(f"weather targets must be a non-empty list of column names, got {targets!r}")
    absent = [t for t in targets if t not in signals.columns]
    if absent:
        raise UserError(f"{path} has no column {', '.join(map(repr, absent))} to predict "
                        f"(numeric columns: {', '.join(map(str, signals.columns))})")
    offset, step, how = _hourly_step(df.iloc[:, 0])
    hourly = signals.iloc[offset::step]
    values = hourly.to_numpy(dtype=np.float64)
    n = len(values)
    need = int(np.ceil((length + HORIZON) / TEST_FRACTION))
    if n < need:
        raise UserError(f"{path} has {n} hourly rows; at least {need} are needed for one window of {length} "
                        f"hours (+{HORIZON} ahead) in both the train and the test part")
    cut = split_point(n, TEST_FRACTION, "weather")
    lo, hi = values[:cut].min(axis=0), values[:cut].max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    scaled = np.clip((values - lo) / span, 0.0, 1.0)
    cols = [signals.columns.get_loc(t) for t in targets]
    stride = max(1, length // 8)
    x_tr, y_tr = _windows(scaled[:cut], scaled[:cut][:, cols], length, stride)
    x_te, y_te = _windows(scaled[cut:], scaled[cut:][:, cols], length, stride)
    source = (f"weather CSV {path} ({status}): {n} hourly rows ({how}), {values.shape[1]} signals, targets "
              f"{', '.join(targets)} {HORIZON} h ahead; first {cut} hours train ({len(x_tr)} windows), "
              f"last {n - cut} test ({len(x_te)} windows)")
    return Dataset(x_tr, y_tr, x_te, y_te, source).head(train_samples, eval_samples)
