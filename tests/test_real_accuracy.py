"""Real-data accuracy: mnist_cnn trained on 8,000 of the shared MNIST test images reaches >= 95% on the
other 2,000 (the loader cuts a lone t10k split 80/20), in both frameworks, through the whole tool
(plan -> worker -> trainer -> result file)."""

from __future__ import annotations

import pytest
from conftest import shared_dataset, this_machine

import xpubench
from xpubench.results.store import load_file

MNIST = shared_dataset("mnist")

pytestmark = pytest.mark.skipif(not (MNIST / "t10k-images-idx3-ubyte.gz").exists(),
                                reason="../shared/datasets/mnist is not beside the checkout")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_mnist_cnn_reaches_95_percent_on_held_out_real_digits(tmp_path, backend, one_thread_workers):
    """2 epochs of batch 16: 1,000 Adam steps over 16,000 images, where 3 epochs of batch 32 took 750 steps
    over 24,000 (torch 31 against ~50 CPU s, JAX 35 against ~46). Measured on the 2-core Zen 3 at seed 0 (the
    test's): torch 97.25%, JAX 97.2% after epoch 2 (94.2% and 96.5% after epoch 1); torch at seed 1: 96.15%.
    Batch 32 for 2 epochs was too close (torch 96.45% and 95.95% at seeds 0 and 1)."""
    out = tmp_path / "real.jsonl"
    (result,) = xpubench.run(processes=1, workloads=["mnist_cnn"], backends=[backend], data="real", data_dir=str(MNIST),
                             batch_sizes=[16], epochs=2, output=out,
                             environment=this_machine())   # detected once per test run
    assert result.status == "ok", result.message
    m = result.metrics
    assert m["steps_per_epoch"] == 8_000 // 16           # trained on the 8,000 train images only
    accuracy = result.series["val_metric"]
    assert len(accuracy) == 2
    assert accuracy[-1] >= 0.95, f"{backend}: validation accuracy per epoch {accuracy}"
    assert result.series["train_loss"][-1] < result.series["train_loss"][0]

    gallery = result.artifacts["gallery"]                  # the report's misclassified-digit gallery
    wrong = [g for g in gallery if not g["correct"]]
    assert wrong and all(g["pred"] != g["label"] for g in wrong)
    assert gallery[:len(wrong)] == wrong                   # mistakes first, most confident first
    assert [g["confidence"] for g in wrong] == sorted((g["confidence"] for g in wrong), reverse=True)
    assert len(gallery[0]["image"]) == 28 and len(gallery[0]["image"][0]) == 28
    (back,) = load_file(out).results                            # the file reads back, gallery included
    assert back.artifacts == result.artifacts
