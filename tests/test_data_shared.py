"""Loaders on the small real datasets in ../shared/datasets (skipped where that folder is absent)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SHARED_DATASETS

from xpubench import data
from xpubench.errors import UserError
from xpubench.workloads.base import WorkloadSpec

SHARED = SHARED_DATASETS

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} not present")


def make(dataset: str, input_shape: tuple[int, ...], input_kind: str, target_kind: str, num_outputs: int,
         vocab: int | None = None) -> WorkloadSpec:
    return WorkloadSpec(name=f"{dataset}_w", title="t", dataset=dataset, input_shape=input_shape,
                        input_kind=input_kind, target_kind=target_kind, num_outputs=num_outputs, loss="x",
                        metric="accuracy", optimizer="adam", learning_rate=1e-3, batch_sizes=(32,),
                        quick_batch_size=32, epochs=1, train_samples=60000, eval_samples=10000,
                        vocab_size=vocab)


def test_mnist_t10k() -> None:
    ds = data.load_real(make("mnist", (28, 28, 1), "image", "class", 10), SHARED)
    assert ds.x_train.shape == (8000, 28, 28, 1) and ds.x_test.shape == (2000, 28, 28, 1)
    labels = np.concatenate([ds.y_train, ds.y_test])
    assert np.bincount(labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert "(verified)" in ds.source and "only the test split" in ds.source
    assert ds.x_test.min() >= 0.0 and ds.x_test.max() == 1.0
    # the same files found from the dataset folder itself
    again = data.load_real(make("mnist", (28, 28, 1), "image", "class", 10), SHARED / "mnist",
                           train_samples=100, eval_samples=50)
    np.testing.assert_array_equal(again.y_train, ds.y_train[:100])
    assert again.y_test.shape == (50,)


def test_tinyshakespeare() -> None:
    text = (SHARED / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")
    assert len(text) == 1115394
    ds = data.load_real(make("text", (100,), "tokens", "token_seq", 256, vocab=256), SHARED)
    n = 1115394 // 101
    assert len(ds.x_train) + len(ds.x_test) == n and ds.x_train.shape[1:] == (100,)
    assert "input.txt (verified)" in ds.source
    assert bytes(ds.x_train[0].astype(np.uint8)) == text.encode()[:100]


def test_rt_polarity() -> None:
    ds = data.load_real(make("imdb", (250,), "tokens", "binary", 1, vocab=15000), SHARED)
    y = np.concatenate([ds.y_train, ds.y_test])
    assert len(y) == 5331 + 5331 and int(y.sum()) == 5331
    assert ds.x_train.shape == (8530, 250) and ds.x_train.dtype == np.int32
    assert ds.x_train.max() < 15000 and (ds.x_train[:, -1] > 0).all()
    assert "sentence polarity" in ds.source


def test_mnist_files_are_not_fashion() -> None:
    with pytest.raises(UserError, match="is the published mnist file, not fashion_mnist's"):
        data.load_real(make("fashion_mnist", (28, 28, 1), "image", "class", 10), SHARED / "mnist")
