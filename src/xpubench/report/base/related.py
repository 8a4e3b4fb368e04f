"""The cases a case is read against, found once for every renderer (terminal, Markdown, HTML, answer).

Each helper takes the results frame (report/base/frame.py) and one of its rows; a match is looked for in
the row's own file first, then in the other files. None when the files hold no such case.
"""

from __future__ import annotations

import pandas as pd

from xpubench.devices.device import is_cpu
from xpubench.report.base.frame import ok_rows

SAME_CASE = ("workload", "backend", "mode", "precision", "batch_size", "size", "users", "rate")


def _same(frame: pd.DataFrame, row, names) -> pd.Series:
    keep = pd.Series(True, index=frame.index)
    for name in names:
        value = row.get(name)
        if value is None or pd.isna(value):
            keep &= frame[name].isna()
        else:
            keep &= (frame[name] == value).fillna(False)
    return keep


def _prefer_own_file(cands: pd.DataFrame, row) -> pd.Series | None:
    if cands.empty:
        return None
    local = cands[cands["source"] == row["source"]]
    return (local if not local.empty else cands).iloc[0]


def cpu_baseline(frame: pd.DataFrame, row) -> pd.Series | None:
    """The same case (workload, backend, mode, precision, batch or N) on the CPU, on one device."""
    cands = ok_rows(frame)
    if cands.empty:
        return None
    cands = cands[_same(cands, row, SAME_CASE) & cands["device"].map(is_cpu) & (cands["devices"] == 1)]
    return _prefer_own_file(cands, row)


def fp32_sibling(frame: pd.DataFrame, row) -> pd.Series | None:
    """The fp32 inference case of the same workload, backend, device, batch, device count and data."""
    cands = ok_rows(frame, "infer")
    if cands.empty:
        return None
    same = _same(cands, row, ("workload", "backend", "device", "batch_size", "devices", "data"))
    return _prefer_own_file(cands[same & (cands["precision"] == "fp32")], row)


def scaling_group(frame: pd.DataFrame, row) -> pd.DataFrame:
    """The ok rows of the row's file that differ from it only in the device count, fewest devices first."""
    cands = ok_rows(frame)
    if cands.empty:
        return cands
    same = _same(cands, row, ("source", "workload", "backend", "device", "mode", "precision", "batch_size"))
    return cands[same].sort_values("devices")


def scaling_baseline(frame: pd.DataFrame, row) -> pd.Series | None:
    """The same case on the fewest devices below the row's count (speedup and efficiency are against it)."""
    group = scaling_group(frame, row)
    fewer = group[group["devices"] < row["devices"]] if not group.empty else group
    return None if fewer.empty else fewer.iloc[0]


def oom_group(frame: pd.DataFrame, row) -> pd.DataFrame:
    """Every batch size of the row's case (same file, workload and its options, backend, device, mode, precision,
    device count), by batch size: which ran out of memory and which fitted."""
    if frame.empty:
        return frame
    same = _same(frame, row, ("source", "workload", "alike", "backend", "device", "mode", "precision", "devices"))
    return frame[same].sort_values("batch_size")


def largest_batch_that_fit(frame: pd.DataFrame, row) -> int | None:
    group = oom_group(frame, row)
    ok = group[(group["status"] == "ok") & group["batch_size"].notna()] if not group.empty else group
    return None if ok.empty else int(ok["batch_size"].max())


def workload_rows(frame: pd.DataFrame, row, same_precision: bool = True) -> pd.DataFrame:
    """The ok rows of the same workload, mode and precision in the row's file: what "the best here" is
    taken over (a bf16 matmul is not the best an fp32 one could reach). ``same_precision=False``: every
    precision."""
    cands = ok_rows(frame)
    if cands.empty:
        return cands
    names = ("source", "workload", "mode", *(("precision",) if same_precision else ()))
    return cands[_same(cands, row, names)]
