"""The report's "Framework comparison": Keras beside native JAX and PyTorch.

For every Keras case that finished ok (``keras:jax``, ``keras:torch``, ``keras:tensorflow``) the same case
natively (backend ``jax`` and ``torch``: same file, workload, device, mode, precision, batch size or
matrix size, device count) and the ratio native / Keras of the headline throughput: samples/s for
training (steady steps) and inference (a pass over the evaluation set), warm FLOP/s for matmul. A ratio
above 1 means the native framework is faster than Keras on it; a figure that is missing stays n/a. A Keras case with no native case beside it is left out (the Training
and Inference sections show it).
"""

from __future__ import annotations

import pandas as pd

from xpubench.report.content import NOISY_MARK, Section, TableBlock
from xpubench.report.frame import ok_rows
from xpubench.report.tables import fmt
from xpubench.units import fmt_flops

HEADLINE = {"train": "samples_per_s", "infer": "samples_per_s", "matmul": "warm_flops_per_s"}
NATIVE = ("jax", "torch")
MATCH = ["source", "workload", "device", "mode", "precision", "batch_size", "size", "devices"]


def _figure(row, name: str):
    value = row.get(name) if name in row.index else None
    return None if value is None or pd.isna(value) else float(value)


def _ratio(native, keras):
    return native / keras if native and keras else None


def keras_comparison(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per ok Keras case that has a native jax or torch case beside it: its headline figure, the
    native figures (None where absent) and the ratios native / keras. Empty when there is none."""
    rows = ok_rows(frame)
    if rows.empty or not rows["backend"].astype(str).str.startswith("keras").any():
        return pd.DataFrame()
    rows = rows[rows["mode"].isin(list(HEADLINE))]
    keys = [k for k in MATCH if k in rows.columns]
    out = []
    for _, group in rows.groupby(keys, dropna=False):
        natives = {b: group[group["backend"] == b].iloc[0] for b in NATIVE if (group["backend"] == b).any()}
        if not natives:   # a Keras case with no native one beside it: nothing to compare
            continue
        for _, keras in group[group["backend"].astype(str).str.startswith("keras")].iterrows():
            metric = HEADLINE[keras["mode"]]
            figure = _figure(keras, metric)
            entry = {k: keras.get(k) for k in keys}
            entry.update(keras_backend=keras["backend"], metric=metric, keras=figure,
                         keras_noisy=bool(keras.get("noisy")))
            for b in NATIVE:
                native = _figure(natives[b], metric) if b in natives else None
                entry[f"native_{b}"] = native
                entry[f"{b}_noisy"] = bool(natives[b].get("noisy")) if b in natives else False
                entry[f"{b}_over_keras"] = _ratio(native, figure)
            out.append(entry)
    return pd.DataFrame(out)


def _missing(v) -> bool:
    return v is None or pd.isna(v)


def _value(v, metric: str) -> str:
    if _missing(v):
        return "n/a"
    return fmt_flops(v) if metric == "warm_flops_per_s" else fmt(v, ",.0f")


def _times(v) -> str:
    return "n/a" if _missing(v) else f"{v:.2f}x"


def comparison_table(table: pd.DataFrame) -> pd.DataFrame:
    """The comparison as formatted strings (n/a where a figure is missing)."""
    out = []
    for _, r in table.iterrows():
        what = (f"N={int(r['size'])}" if r["mode"] == "matmul" and not pd.isna(r.get("size"))
                else f"batch {int(r['batch_size'])}" if not pd.isna(r.get("batch_size")) else "")
        unit = "FLOP/s" if r["metric"] == "warm_flops_per_s" else "samples/s"
        out.append({"workload": r["workload"], "device": r["device"],
                    "case": f"{r['mode']} {r['precision']} {what}".strip(), "keras": r["keras_backend"],
                    f"keras {unit}": _value(r["keras"], r["metric"]) + (NOISY_MARK if r["keras_noisy"] else ""),
                    **{k: v for b in NATIVE for k, v in (
                        (b, _value(r[f"native_{b}"], r["metric"]) + (NOISY_MARK if r[f"{b}_noisy"] else "")),
                        (f"{b} / keras", _times(r[f"{b}_over_keras"])))}})
    return pd.DataFrame(out)


def keras_section(frame: pd.DataFrame) -> Section | None:
    """The report section, or None when the files hold no Keras case."""
    table = keras_comparison(frame)
    if table.empty:
        return None
    return Section("Framework comparison", "keras", intro=(
        "Keras 3 (model.fit / predict_on_batch on its JAX or PyTorch backend) beside the same case in native "
        "JAX and PyTorch, same file, device, precision and batch. Ratio = native / Keras of the headline "
        "throughput (training: steady samples/s; inference: samples/s over the evaluation set; matmul: warm "
        "FLOP/s): above 1, native is faster. n/a: that framework has no such case in the file."),
        tables=[TableBlock("", comparison_table(table))])
