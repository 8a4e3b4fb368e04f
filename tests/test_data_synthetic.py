"""synthetic(): exactly the model's shapes and dtypes, cheap, seeded."""

from __future__ import annotations

import time

import numpy as np
import pytest

from xpubench import data
from xpubench.workloads.base import WorkloadSpec


def make(input_shape: tuple[int, ...], input_kind: str, target_kind: str, num_outputs: int,
         vocab: int | None = None, target_shape: tuple[int, ...] = ()) -> WorkloadSpec:
    return WorkloadSpec(name="w", title="t", dataset="x", input_shape=input_shape, input_kind=input_kind,
                        target_kind=target_kind, num_outputs=num_outputs, loss="mse", metric="mse",
                        optimizer="adam", learning_rate=1e-3, batch_sizes=(32,), quick_batch_size=32,
                        epochs=1, train_samples=10, eval_samples=10, vocab_size=vocab,
                        target_shape=target_shape)


def test_images() -> None:
    t0 = time.perf_counter()
    ds = data.synthetic(make((28, 28, 1), "image", "class", 10), 60000, 10000)
    assert time.perf_counter() - t0 < 10
    assert ds.x_train.shape == (60000, 28, 28, 1) and ds.x_train.dtype == np.float32
    assert ds.y_train.shape == (60000,) and ds.y_train.dtype == np.int32
    assert ds.x_test.shape == (10000, 28, 28, 1) and ds.y_test.shape == (10000,)
    assert ds.x_train.min() >= 0.0 and ds.x_train.max() <= 1.0
    assert set(np.unique(ds.y_train)) == set(range(10))
    assert ds.source.startswith("synthetic")


def test_tokens_binary_class_and_seq() -> None:
    ds = data.synthetic(make((250,), "tokens", "binary", 1, vocab=15000), 64, 16)
    assert ds.x_train.shape == (64, 250) and ds.x_train.dtype == np.int32
    assert ds.x_train.min() >= 0 and ds.x_train.max() < 15000
    assert ds.y_train.shape == (64,) and ds.y_train.dtype == np.float32
    assert set(np.unique(ds.y_train)) <= {0.0, 1.0}
    ds = data.synthetic(make((20,), "tokens", "class", 4, vocab=100), 50, 5)
    assert ds.y_train.dtype == np.int32 and ds.y_train.max() < 4
    ds = data.synthetic(make((100,), "tokens", "token_seq", 256, vocab=256, target_shape=(100,)), 8, 4)
    assert ds.y_train.shape == (8, 100) and ds.y_train.dtype == np.int32 and ds.y_train.max() < 256
    assert ds.x_test.shape == (4, 100)


def test_series() -> None:
    ds = data.synthetic(make((1344, 20), "series", "series", 3, target_shape=(1344, 3)), 6, 2)
    assert ds.x_train.shape == (6, 1344, 20) and ds.x_train.dtype == np.float32
    assert ds.y_train.shape == (6, 1344, 3) and ds.y_train.dtype == np.float32
    assert ds.y_train.min() >= 0.0 and ds.y_train.max() <= 1.0
    no_shape = data.synthetic(make((10, 4), "series", "series", 2), 3, 3)
    assert no_shape.y_train.shape == (3, 2)


def test_seeded() -> None:
    spec = make((8, 8, 3), "image", "class", 10)
    a, b, c = (data.synthetic(spec, 20, 5, seed=s) for s in (0, 0, 1))
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.x_train, c.x_train)
    assert not np.array_equal(a.x_train[:5], a.x_test)     # train and test are separate streams


def test_zero_and_bad_kind() -> None:
    ds = data.synthetic(make((4,), "tokens", "class", 2, vocab=10), 0, 3)
    assert ds.x_train.shape == (0, 4) and ds.y_test.shape == (3,)
    with pytest.raises(Exception, match="unknown input kind"):
        data.synthetic(make((4,), "audio", "class", 2), 1, 1)


def test_workload_specs_if_present() -> None:
    """Every registered model workload gets synthetic data and has a real-data loader."""
    workloads = pytest.importorskip("xpubench.workloads")
    for name in workloads.names("model"):
        try:
            spec = workloads.get_workload(name).spec
        except ImportError:
            continue
        assert spec.dataset in data.DATASETS, name
        ds = data.synthetic(spec, 4, 2)
        assert ds.x_train.shape == (4, *spec.input_shape), name
        assert ds.y_train.shape[1:] == tuple(spec.target_shape), name
