"""The summary's lines (report/tables/summary.py renders them): the frame's rows gathered into one line per
workload x test x dtype, a cell per backend/device column holding the row's headline figure; a language
model's rows as its pp and tg lines, labelled like llama-bench (the runtime table, report/tables/llm.py,
shows those). What a line's test is named after is what its mode is measured at (``setting``: "N=1024",
"b32"), the unit what its mode declares."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from xpubench.report.base.frame import backend_label, many_sources, measured_at, num, row_mode, setting
from xpubench.report.tables import target
from xpubench.report.tables.headline import better, headline_rate, spread
from xpubench.report.tables.llm import model_name, test_name
from xpubench.results.metrics import unit

MODE_ORDER = {"matmul": 0, "train": 1, "infer": 2, "generate": 3}
TEST_WORDS = {"train": "", "infer": "infer ", "generate": "gen "}   # training: the batch alone


@dataclass
class Cell:
    row: pd.Series
    value: float | None            # the headline figure (None: did not finish ok)
    spread: str = ""               # "±4%", or "" where unknown
    metric: str | None = None      # the figure's metric when it is not the headline (a language model's pp)


@dataclass
class Line:
    order: tuple
    workload: str
    test: str
    dtype: str
    unit: str
    higher: bool
    cells: dict[str, Cell] = field(default_factory=dict)
    tg: bool = False               # a language model's generation row (it gets the share of its bandwidth bound)
    llm: bool = False              # a language model's pp or tg row: in the runtime table (llm.py), not the summary


def _where(row) -> str:
    devices = int(row["devices"])
    return str(row["device"]) + (f" x{devices}" if devices > 1 else "")


def _column(row, sources: bool = False) -> str:
    """A backend (with the variant it ran: "torch (eager decode)") on a device: one column of the summary;
    with several results files (a fleet's machines), each file's own."""
    column = f"{backend_label(row)} {_where(row)}"
    return f"{row['source']}: {column}" if sources else column


def column_headers(rows: pd.DataFrame) -> tuple[list[str], dict[str, str], str]:
    """The columns, the header of each (the device left out where every column has the same one, which the
    title then names: its third value)."""
    sources = many_sources(rows)
    devices = {_where(r) for _, r in rows.iterrows()}
    one = len(devices) == 1
    header: dict[str, str] = {}
    for _, r in rows.iterrows():
        header.setdefault(_column(r, sources), (f"{r['source']}: " if sources else "")
                          + (backend_label(r) if one else f"{backend_label(r)} {_where(r)}"))
    return list(header), header, f" on {next(iter(devices))}" if one and header else ""


def _unit(row) -> str:
    """The unit of the row's headline figure as its mode declares it ("samples/s", "tok/s", "FLOP/s")."""
    if target.is_target_row(row):
        return "s to target"
    if row["mode"] == "generate":
        return "tok/s"
    mode = row_mode(row)
    figure = mode.headline_figure(row) if mode else None
    if figure is None:
        return ""
    return figure.after or ("FLOP/s" if unit(figure.metric) == "FLOP/s" else "")


def _test(row) -> str:
    mode, at = str(row["mode"]), setting(row, short=True)   # "N=1024", "b32": what its mode is measured at
    if mode == "matmul":
        return at or mode
    if target.is_target_row(row):
        return f"to {row.get('target')} {at}"
    return (TEST_WORDS.get(mode, f"{mode} ") + at).strip() or mode


def _spread(row) -> str:
    text = spread(row).replace(" IQR", "")
    return "" if text == "-" else text


def _llm_lines(frame: pd.DataFrame, order: dict, lines: dict[tuple, Line], sources: bool) -> set:
    """A language model's pp and tg rows, labelled like llama-bench (the model and its layers, pp64, tg16),
    into ``lines``; a case of it that did not finish shows its status in both. Returns the rows placed."""
    placed, families = set(), {}
    for index, row in frame.iterrows():
        if row["mode"] != "generate" or row.get("status") != "ok" or num(row, "decode_bytes_per_token") is None:
            continue
        batch = measured_at(row)
        for kind, metric in {"pp": "prefill_tokens_per_s", "tg": "decode_tokens_per_s"}.items():
            test = test_name(row, kind) + (f" b{batch}" if batch > 1 else "")   # its lengths and depth
            model, precision = model_name(row), str(row["precision"])
            line = lines.setdefault(("llm", model, kind, test, precision, row["alike"]), Line(
                (MODE_ORDER["generate"], order[row["workload"]], model, float(batch), _sort_value(num(row, "depth")),
                 kind, precision), model, test,
                precision, "tok/s", True, tg=kind == "tg", llm=True))
            line.cells[_column(row, sources)] = Cell(row, num(row, metric), _spread(row) if kind == "tg" else "",
                                            metric if kind == "pp" else None)
            families.setdefault((row["workload"], precision, batch, row["alike"]), []).append(line)
        placed.add(index)
    for index, row in frame.iterrows():   # the cases of the same model that did not finish
        if row["mode"] != "generate" or row.get("status") == "ok":
            continue
        family = families.get((row["workload"], str(row["precision"]), measured_at(row), row["alike"]))
        if family:
            for line in family:
                line.cells.setdefault(_column(row, sources), Cell(row, None))
            placed.add(index)
    return placed


def _sort_value(value) -> float:
    """A figure as a sort key: None (not recorded) first."""
    return -1.0 if value is None else float(value)


def summary_lines(frame: pd.DataFrame) -> list[Line]:
    lines: dict[tuple, Line] = {}
    order = {name: i for i, name in enumerate(dict.fromkeys(frame["workload"]))}
    sources = many_sources(frame)
    placed = _llm_lines(frame, order, lines, sources)
    for index, row in frame.iterrows():
        if index in placed:
            continue
        ok = row.get("status") == "ok"
        column, mode = _column(row, sources), str(row["mode"])
        label, test = str(row["workload"]), _test(row)
        line = lines.setdefault((label, mode, test, row["precision"]), Line(
            (MODE_ORDER.get(mode, 9), order[row["workload"]], label,
             _sort_value(measured_at(row)), test, str(row["precision"])),
            label, test, str(row["precision"]), _unit(row),
            better(row) and not target.is_target_row(row)))   # a time to target: the shorter the better
        if target.is_target_row(row):
            value = num(row, "time_to_target_s") if ok and row.get("target_reached") else None
        else:
            value = headline_rate(row) if ok else None
        line.cells[column] = Cell(row, value, _spread(row) if ok and value is not None else "")
    return sorted(lines.values(), key=lambda li: li.order)
