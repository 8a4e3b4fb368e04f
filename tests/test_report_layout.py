"""The report reads at a glance: chart labels that don't overlap, a training table that fits a laptop
page, curves of synthetic data labelled as such, and `xpubench run` output that fits the terminal."""

import dataclasses
import io

import pandas as pd
import pytest
from rich.console import Console
from test_report_frame import FINGERPRINT, record

from xpubench.report import charts
from xpubench.report.chart_labels import overlapping
from xpubench.report.frame import ResultSet, results_frame

LONG_WORKLOADS = ("cifar10_resnet18", "fashion_mnist_mlp", "imdb_lstm", "mnist_cnn", "tiny_transformer_lm",
                  "wikitext_gpt_small")


def many_workloads(backends=("torch", "jax"), devices=("cpu", "gpu:0")):
    return [record(workload=w, backend=b, device=d, step=0.01 * (i + 1), seed=i)
            for i, w in enumerate(LONG_WORKLOADS) for b in backends for d in devices]


@pytest.mark.parametrize("backends,devices", [(("torch",), ("cpu",)), (("torch", "jax"), ("cpu", "gpu:0"))])
def test_throughput_chart_workload_labels_do_not_overlap(backends, devices):
    fig, ax = charts.throughput_figure(results_frame(many_workloads(backends, devices)))[:2]
    labels = ax.get_xticklabels()
    assert [t.get_text() for t in labels] == sorted(LONG_WORKLOADS)
    assert overlapping(fig, labels) == []


def test_overlap_check_catches_crowded_labels():
    """The check itself: six long labels crammed into a narrow figure do overlap."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2))
    ax = fig.add_subplot()
    ax.set_xticks(range(6), LONG_WORKLOADS)
    assert overlapping(fig, ax.get_xticklabels())
