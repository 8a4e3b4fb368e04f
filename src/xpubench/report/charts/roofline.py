"""The roofline chart: every result whose FLOPs and bytes moved are known at its arithmetic intensity,
under the measured roofs (ceilings/: the achievable FLOP/s and the STREAM bandwidth) and the spec peaks;
the caption says, per case, why a result has no point."""

from __future__ import annotations

import numpy as np
import pandas as pd

from xpubench.report.base.content import Chart
from xpubench.report.base.frame import column, ok_rows, setting
from xpubench.report.charts.labels import place_point_labels
from xpubench.report.charts.performance import _labelled, colors, flops_unit, new_figure, plain_log, png
from xpubench.results.modes import MODES, mode_of


def _roofs(rows: pd.DataFrame, column_name: str) -> dict[tuple, list[str]]:
    """{(label, FLOP/s, bytes/s or None, series of its first row): [dtypes]} of the rows' roofs in
    ``column_name`` (``series``: the colour of its points)."""
    roofs: dict[tuple, list[str]] = {}
    for (backend, device_name, precision), grp in rows.groupby(["backend", "device_name", "precision"], dropna=False):
        if column_name == "ceiling_flops_per_s":   # a lower bound (the file's fastest matmul) is no measured roof
            grp = grp[column(grp, "ceiling_is_lower_bound").fillna(0) == 0]
        top = column(grp, column_name).dropna()
        if top.empty:
            continue
        bw_name = "measured_bandwidth" if column_name == "ceiling_flops_per_s" else "memory_bandwidth"
        bw = column(grp, bw_name).dropna()
        who = (f"{backend} " if column_name == "ceiling_flops_per_s" else "") + str(device_name or "device")
        estimate = bool(column(grp, "peak_is_estimate").fillna(0).astype(bool).any())
        key = (who + (" (est.)" if estimate and column_name == "peak_flops_per_s" else ""), float(top.max()),
               float(bw.iloc[0]) if not bw.empty else None, str(grp["series"].iloc[0]))
        if str(precision) not in roofs.setdefault(key, []):
            roofs[key].append(str(precision))
    return roofs


def roofline_chart(frame: pd.DataFrame) -> Chart | None:
    """Every result whose bytes moved are known (matmul: A, B and C; models where a backend counted them)
    at its arithmetic intensity, under the measured roofs (flat at the achievable FLOP/s of the ceiling
    search, sloped at the measured bandwidth) and, dashed, the spec peaks where known."""
    rows = ok_rows(frame)
    if rows.empty:
        return None
    ranked = [m.name for m in MODES.values() if m.ranked]   # results/modes.py: ranked against the ceiling
    rows = rows[rows["mode"].isin(ranked)]
    rows = rows.assign(intensity=column(rows, "arithmetic_intensity"),
                       achieved=pd.to_numeric(pd.Series([mode_of(r["mode"]).flops(r) for _, r in rows.iterrows()],
                                                        index=rows.index, dtype=object), errors="coerce"))
    rows = rows[rows["intensity"].notna() & rows["achieved"].notna()]
    if rows.empty:
        return None
    rows = _labelled(rows)
    measured, spec = _roofs(rows, "ceiling_flops_per_s"), _roofs(rows, "peak_flops_per_s")
    tops = [k[1] for k in (*measured, *spec)]
    palette = colors(rows["series"])
    scale, unit = flops_unit(float(np.nanmax(np.r_[rows["achieved"], tops])))
    fig = new_figure(figsize=(7.5, 5.0))
    ax = fig.add_subplot()
    xs = np.geomspace(max(rows["intensity"].min() / 4, 0.01), rows["intensity"].max() * 4, 200)
    notes = []
    for (who, top, bw, series), dtypes in measured.items():
        roof = np.full_like(xs, top) if bw is None else np.minimum(top, bw * xs)
        ax.plot(xs, roof / scale, "-", lw=1.4, color=palette[series], alpha=0.8,
                label=f"measured roof: {who} {'/'.join(dtypes)}")
        notes.append(f"{who} {'/'.join(dtypes)}: ceiling {top / scale:,.1f} {unit}, "
                     + (f"bandwidth {bw / 1e9:,.1f} GB/s" if bw else "bandwidth not measured (no slope)"))
    spec = {(who, top, bw, None): dtypes for (who, top, bw, _), dtypes in spec.items()}
    for (who, top, bw, _), dtypes in spec.items():
        roof = np.full_like(xs, top) if bw is None else np.minimum(top, bw * xs)
        ax.plot(xs, roof / scale, "--", lw=1.0, color="#999")
        ax.annotate(f"spec: {who} {'/'.join(dtypes)}", (xs[0], top / scale),
                    ha="left", va="bottom", fontsize=7, color="#777")
    markers = dict(zip(ranked, "os^vDP*"))
    points = []
    for (label, mode), grp in rows.groupby(["series", "mode"], sort=False):
        ax.scatter(grp["intensity"], grp["achieved"] / scale, s=36, color=palette[label], marker=markers[mode],
                   label=f"{label} {mode}", zorder=3)
        for _, r in grp.iterrows():   # a case measured at a size (matmul's N) by it, a model by its workload
            text = setting(r) if mode_of(mode).size != "batch_size" else str(r["workload"])
            points.append((r["intensity"], r["achieved"] / scale, text))
    plain_log(ax, "x")
    plain_log(ax, "y")
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved, log scale)")
    ax.set_ylabel(f"achieved {unit} (log scale)")
    ax.set_title("Roofline: measured ceilings and every result with known bytes")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)   # beside, over no point
    place_point_labels(fig, ax, points)   # last: on the final axes, no two labels overlapping
    unplaced = not_placed(frame, rows.index)
    caption = ("Solid: the measured roofline (flat at the ceiling search's achievable FLOP/s, sloped at the "
               "measured STREAM bandwidth); dashed: the spec peak (a CPU's is an estimate). Matmul bytes: read A "
               "and B, write C once; a model's where its backend counted them. Measured: "
               + ("; ".join(notes) if notes else "none recorded (run `xpubench ceilings`)") + "."
               + (" Not placed (a point needs its FLOPs and the bytes it moves): "
                  + "; ".join(f"{', '.join(cases)}: {why}" for why, cases in unplaced.items()) + "."
                  if unplaced else ""))
    return Chart("roofline", "Roofline", caption, png(fig))


def not_placed(frame: pd.DataFrame, placed) -> dict[str, list[str]]:
    """{why: [cases]} of the ranked results the roofline has no point for (not in ``placed``, an index of
    the frame): a case needs its FLOPs and the bytes it moves; the reason is the one its backend recorded
    (``bytes_unknown``), else what is missing."""
    every = ok_rows(frame)
    every = every[every["mode"].isin([m.name for m in MODES.values() if m.ranked])
                  & ~every.index.isin(placed)]
    out: dict[str, list[str]] = {}
    for _, r in every.iterrows():
        mode = mode_of(r["mode"])
        if mode.flops(r) is None:
            why = "its FLOPs are not counted"
        else:
            why = str(r.get("bytes_unknown")) if pd.notna(r.get("bytes_unknown")) else "no bytes moved recorded"
        case = f"{r['workload']} {r['mode']} ({r['backend']}{'' if r['precision'] == 'fp32' else ' ' + r['precision']})"
        if case not in out.setdefault(why, []):
            out[why].append(case)
    return out
