"""Backends side by side (report/sections.py lists both tables):

* ``backend_pairs(data)``: every two backends that ran the same case (file, workload, device, mode,
  precision, batch or N, device count, the workload's key options: ``alike``, report/base/frame.py), the
  later one's speed over the earlier one's with the 95% interval of the two-level bootstrap
  (results/ratio.py ratio_estimate) and a verdict; each backend named by its own name and the variant it
  ran ("torch (eager decode)": a backend option such as torch's --decode is not the case's identity, it
  is labelled), none in the code;
* the "Framework comparison": a backend that runs on other frameworks (its record's ``variants``: Keras)
  beside the same case on those frameworks natively (``layered_backends``, from the records).

For every Keras case that finished ok (``keras:jax``, ``keras:torch``, ``keras:tensorflow``) the same case
natively (backend ``jax`` and ``torch``: same file, workload, device, mode, precision, batch size or
matrix size, device count) and the ratio native / Keras of the headline throughput: samples/s for
training (steady steps) and inference (a pass over the evaluation set), warm FLOP/s for matmul. A ratio
above 1 means the native framework is faster than Keras on it; a figure that is missing stays n/a. A Keras
case with no native case beside it is left out (the Training and Inference sections show it).
"""

from __future__ import annotations

import pandas as pd

from xpubench.report.base.cells import case_text, fmt, fmt_seconds, noisy
from xpubench.report.base.content import NOISY_MARK
from xpubench.report.base.frame import ResultSet, backend_label, num, ok_rows, row_mode, setting
from xpubench.report.base.table import Table, text_table
from xpubench.results.metrics import unit
from xpubench.results.ratio import ratio_estimate
from xpubench.units import fmt_flops

MATCH = ["source", "workload", "device", "mode", "precision", "batch_size", "size", "users", "rate", "devices"]


def _figure(row, name: str | None):
    value = num(row, name)
    return None if value is None else float(value)


def _headline(row):
    """The row's headline figure (its mode's, results/modes.py; the last declared one, samples/s, when the
    row has none of them), None for a mode nobody declared."""
    mode = row_mode(row)
    return (mode.headline_figure(row) or mode.headline[-1]) if mode else None


def faster_text(est, a: str, b: str) -> str:
    """The estimate (``b``'s speed over ``a``'s) as the reader says it, the faster one first and the ratio
    never below 1: "jax is 2.50x faster than torch [95% CI 2.10-2.90x]"; a ratio that rounds to 1.00x:
    "jax and torch: the same (1.00x) [95% CI 0.97-1.03x]"."""
    if est is None:
        return "n/a"
    ratio, low, high, fast, slow = est.ratio, est.low, est.high, b, a
    if ratio < 1:
        ratio, low, high, fast, slow = 1 / ratio, 1 / high, 1 / low, a, b
    interval = f"[95% CI {low:.2f}-{high:.2f}x]"
    if f"{ratio:.2f}" == "1.00":
        return f"{a} and {b}: the same (1.00x) {interval}"
    return f"{fast} is {ratio:.2f}x faster than {slow} {interval}"


def _pair_row(data: ResultSet, a, b) -> dict[str, str]:
    est = ratio_estimate(data.groups(b), data.groups(a))   # time of a / time of b: b's speed over a's
    if est is None:
        verdict = "n/a"
    elif not est.significant:
        verdict = "not significant" + (f" ({est.note})" if est.note else "")
    else:
        verdict = "significant"
    what = case_text(a) + (f" ({a['options_text']})" if a.get("options_text") else "")
    return {"workload": a["workload"], "device": a["device"], "case": what, "A": backend_label(a),
            "A time": noisy(a, fmt_seconds(num(a, a["timing"]))), "B": backend_label(b),
            "B time": noisy(b, fmt_seconds(num(b, b["timing"]))),
            "speed": faster_text(est, backend_label(a), backend_label(b)), "verdict": verdict}


def backend_pairs(data: ResultSet) -> list[Table]:
    """Every two backends (a backend's variants apart: torch's eager and compiled decode) that ran the same
    case, A the one that comes first in the files; empty when no case ran on two backends."""
    rows = ok_rows(data.frame)
    if rows.empty:
        return []
    rows = rows.assign(label=[backend_label(r) for _, r in rows.iterrows()])
    order = {b: i for i, b in enumerate(dict.fromkeys(rows["label"]))}
    out = []
    # what MATCH leaves out (a prompt length, a model preset) must agree: the key options (``alike``)
    for _, group in rows.groupby([*MATCH, "alike"], dropna=False):
        firsts = [group[group["label"] == b].iloc[0] for b in sorted(set(group["label"]), key=order.get)]
        out += [_pair_row(data, a, b) for i, a in enumerate(firsts) for b in firsts[i + 1:]]
    return [text_table("", pd.DataFrame(out))] if out else []


def layered_backends() -> dict[str, list[str]]:
    """Each backend that runs on other frameworks (its record's ``variants``: keras on jax, torch,
    tensorflow) -> the backends here those variants run on natively (``device_backend``) that have model
    cases of their own: keras -> jax, torch (keras:tensorflow runs on the host CPU's record, numpy's)."""
    from xpubench import backends

    out = {}
    for name in backends.names():
        record = backends.get(name)
        natives = [backends.device_backend(f"{name}:{v}") for v in record.variants]
        natives = [b for b in dict.fromkeys(natives) if backends.known(b) and backends.get(b).trains]
        if natives:
            out[name] = natives
    return out


def _ratio(native, on_top):
    return native / on_top if native and on_top else None


def layered_comparison(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per ok case of a backend that runs on other frameworks (a keras:* case) that has a native
    case beside it: its headline figure, the native figures (None where absent) and the ratios native /
    layered (``{native}_over``). Empty when there is none."""
    rows = ok_rows(frame)
    if rows.empty:
        return pd.DataFrame()
    rows = rows[[_headline(r) is not None for _, r in rows.iterrows()]]
    keys = [k for k in MATCH if k in rows.columns]
    out = []
    for layered, native_backends in layered_backends().items():
        for _, group in rows.groupby(keys, dropna=False):
            natives = {b: group[group["backend"] == b].iloc[0] for b in native_backends
                       if (group["backend"] == b).any()}
            if not natives:   # a layered case with no native one beside it: nothing to compare
                continue
            for _, case in group[group["backend"].astype(str).str.partition(":")[0] == layered].iterrows():
                headline = _headline(case)
                figure = _figure(case, headline.metric)
                entry = {k: case.get(k) for k in keys}
                entry.update(layered=layered, natives=tuple(native_backends), on_top=case["backend"],
                             metric=headline.metric, figure=figure, noisy=bool(case.get("noisy")),
                             unit="FLOP/s" if unit(headline.metric) == "FLOP/s" else headline.after)
                for b in native_backends:
                    native = _figure(natives[b], headline.metric) if b in natives else None
                    entry[f"native_{b}"] = native
                    entry[f"{b}_noisy"] = bool(natives[b].get("noisy")) if b in natives else False
                    entry[f"{b}_over"] = _ratio(native, figure)
                out.append(entry)
    return pd.DataFrame(out)


def _missing(v) -> bool:
    return v is None or pd.isna(v)


def _value(v, metric: str) -> str:
    if _missing(v):
        return "n/a"
    return fmt_flops(v) if unit(metric) == "FLOP/s" else fmt(v, ",.0f")


def _times(v) -> str:
    return "n/a" if _missing(v) else f"{v:.2f}x"


def comparison_table(table: pd.DataFrame) -> pd.DataFrame:
    """The comparison as formatted strings (n/a where a figure is missing), its columns named after the
    layered backend and its natives ("keras samples/s", "jax / keras")."""
    out = []
    for _, r in table.iterrows():
        layered = r["layered"]
        out.append({"workload": r["workload"], "device": r["device"],
                    "case": f"{r['mode']} {r['precision']} {setting(r)}".strip(), layered: r["on_top"],
                    f"{layered} {r['unit']}": _value(r["figure"], r["metric"]) + (NOISY_MARK if r["noisy"] else ""),
                    **{k: v for b in r["natives"] for k, v in (
                        (b, _value(r[f"native_{b}"], r["metric"]) + (NOISY_MARK if r[f"{b}_noisy"] else "")),
                        (f"{b} / {layered}", _times(r[f"{b}_over"])))}})
    return pd.DataFrame(out)


def layered_table(frame: pd.DataFrame) -> Table:
    """The comparison as a table; empty when the files hold no layered case with a native one beside it."""
    table = layered_comparison(frame)
    return text_table("", comparison_table(table) if not table.empty else pd.DataFrame())
