"""Training-quality charts: loss and validation metric per epoch, and the misclassified-image gallery."""

from __future__ import annotations

import numpy as np
import pandas as pd

from xpubench.case import DATA_SOURCES
from xpubench.report.base.content import Chart
from xpubench.report.base.frame import column, many_sources, ok_rows, series_label
from xpubench.report.charts.performance import colors, new_figure, png

GALLERY_IMAGES = 24
CLASS_NAMES = {  # the public label names of the data sets the gallery can show
    "fashion_mnist": ("T-shirt", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                      "Boot"),
    "cifar10": ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"),
}


def workload_spec(name: str):
    """The workload's spec (metric name, data set), or None for a workload this xpubench doesn't know or
    one without a model."""
    from xpubench.errors import UserError
    from xpubench.workloads import get_workload

    try:
        return get_workload(name).spec
    except (UserError, ImportError):
        return None


def metric_name(workload: str) -> str:
    spec = workload_spec(workload)
    return spec.metric if spec is not None else "metric"


def curves_chart(frame: pd.DataFrame, items, *, synthetic: bool = False) -> Chart | None:
    """Per workload: training loss and validation metric per epoch, one line per run; the runs on real
    data (``synthetic=False``) or those on synthetic data (random labels: the validation metric means
    nothing, the chart says so and comes folded)."""
    rows = ok_rows(frame, "train")
    if not rows.empty:
        on_synthetic = rows["data"] == DATA_SOURCES[0]
        rows = rows[on_synthetic if synthetic else ~on_synthetic]
    rows = rows[[bool(items[i].result.series.get("train_loss")) for i in rows["entry"]]] if not rows.empty else rows
    if rows.empty:
        return None
    workloads = sorted(rows["workload"].unique())
    fig = new_figure(figsize=(11.0, 3.6 * len(workloads)))
    multi_source = many_sources(rows)
    for w, workload in enumerate(workloads):
        sub = rows[rows["workload"] == workload]
        with_batch = sub["batch_size"].nunique() > 1
        labels = [series_label(r, with_source=multi_source, with_batch=with_batch) for _, r in sub.iterrows()]
        palette = colors(labels)
        loss_ax = fig.add_subplot(len(workloads), 2, 2 * w + 1)
        metric_ax = fig.add_subplot(len(workloads), 2, 2 * w + 2)
        for label, (_, r) in zip(labels, sub.iterrows()):
            series = items[r["entry"]].result.series
            for ax, name in ((loss_ax, "train_loss"), (metric_ax, "val_metric")):
                values = [np.nan if v is None else v for v in series.get(name) or []]
                if values:
                    ax.plot(np.arange(1, len(values) + 1), values, "o-", ms=3, color=palette[label], label=label)
        metric = metric_name(workload)
        tag = " (synthetic data)" if synthetic else ""
        loss_ax.set_title(f"{workload}: training loss{tag}")
        loss_ax.set_ylabel("mean training loss")
        metric_ax.set_title(f"{workload}: validation {metric}" + (" (synthetic data: meaningless)" if synthetic
                                                                  else ""))
        metric_ax.set_ylabel(f"validation {metric}" + (" (fraction correct)" if metric == "accuracy" else ""))
        for ax in (loss_ax, metric_ax):
            ax.set_xlabel("epoch")
            ax.xaxis.get_major_locator().set_params(integer=True)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    if synthetic:
        return Chart("curves_synthetic", "Training curves on synthetic data (random labels: the validation "
                     "metric means nothing)", "Runs on generated inputs with random labels, made to time the "
                     "hardware: the loss shows the training loop runs; no accuracy can be learned from "
                     "random labels, so the validation metric says nothing about the model. Measure with "
                     "--data real for meaningful curves.", png(fig), folded=True)
    return Chart("curves", "Training curves", "Mean training loss of each epoch's steps and the validation "
                 "metric after each epoch, on real data. Short benchmark runs are far from converged: these "
                 "curves show that training works and that devices/frameworks agree, not final quality.",
                 png(fig))


def _gallery_source(frame: pd.DataFrame, items, workload: str):
    """The run of ``workload`` whose gallery to show: the best validation metric."""
    rows = ok_rows(frame, "train")
    rows = rows[(rows["workload"] == workload)]
    rows = rows[[bool(items[i].result.artifacts.get("gallery")) for i in rows["entry"]]] if not rows.empty else rows
    if rows.empty:
        return None
    score = column(rows, "final_metric").fillna(-np.inf)   # all-missing when no row has it
    return rows.loc[score.idxmax()]


def gallery_charts(frame: pd.DataFrame, items) -> list[Chart]:
    """For image classifiers trained on real data: misclassified test images (most confident mistakes
    first), then a few correct ones, labelled true -> predicted."""
    charts = []
    for workload in sorted(ok_rows(frame, "train")["workload"].unique()) if not frame.empty else []:
        row = _gallery_source(frame, items, workload)
        if row is None:
            continue
        gallery = items[row["entry"]].result.artifacts["gallery"]
        wrong = [g for g in gallery if not g.get("correct")]
        shown = (wrong + [g for g in gallery if g.get("correct")])[:GALLERY_IMAGES]
        spec = workload_spec(workload)
        names = CLASS_NAMES.get(spec.dataset if spec is not None else "", ())

        def name(i, names=names):
            return names[i] if 0 <= i < len(names) else str(i)

        cols = 8
        fig = new_figure(figsize=(cols * 1.35, 1.6 * ((len(shown) + cols - 1) // cols) + 0.4))
        for k, g in enumerate(shown):
            ax = fig.add_subplot((len(shown) + cols - 1) // cols, cols, k + 1)
            image = np.asarray(g.get("image") or [[0]], dtype=np.uint8)
            ax.imshow(image, cmap="gray" if image.ndim == 2 else None, vmin=0, vmax=255)
            ax.set_xticks([])
            ax.set_yticks([])
            ok = bool(g.get("correct"))
            ax.set_title(f"{name(g.get('label', -1))}→{name(g.get('pred', -1))} {g.get('confidence', 0):.0%}",
                         fontsize=8, color="#17803d" if ok else "#c0262d")
            for spine in ax.spines.values():
                spine.set_edgecolor("#17803d" if ok else "#c0262d")
                spine.set_linewidth(2)
        who = series_label(row, with_source=many_sources(ok_rows(frame, "train")))
        fig.suptitle(f"{workload} ({who}): misclassified test images first", fontsize=11)
        fig.tight_layout()
        charts.append(Chart(f"gallery_{workload}", f"Misclassified {workload} test images",
                            f"From the {who} run (batch {row['batch_size']}, validation {metric_name(workload)} "
                            f"{row.get('final_metric', float('nan')):.3f}): {min(len(wrong), len(shown))} wrongly "
                            "predicted test images (red, most confident mistakes first)"
                            + (f", then {len(shown) - len(wrong)} correct ones (green)" if len(shown) > len(wrong)
                               else "") + "; titles: true label→prediction and the model's confidence.", png(fig)))
    return charts
