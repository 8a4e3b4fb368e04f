"""Datasets: real loaders for the standard formats and synthetic data of the same shapes.

The contract every caller relies on:

    Dataset(x_train, y_train, x_test, y_test, source)
    load_real(spec, data_dir, *, download=False, train_samples=None, eval_samples=None) -> Dataset
    synthetic(spec, train_samples, eval_samples, seed=0) -> Dataset

Arrays are numpy, already in the model's input format (see xpubench.workloads.base). Every problem
with the files (missing, truncated, wrong format, checksum mismatch) is a ``UserError`` with one line
saying which file and what to do; nothing is downloaded unless ``download=True``. Each loader's module
documents where it looks inside ``data_dir`` and how it splits and scales.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from xpubench.data.core import Dataset, Loader, default_data_dir, resolve_root
from xpubench.data.images import load_cifar10, load_idx
from xpubench.data.imdb import load_imdb
from xpubench.data.synthetic import synthetic
from xpubench.data.text import load_text
from xpubench.data.weather import load_weather
from xpubench.errors import UserError

if TYPE_CHECKING:
    from xpubench.workloads.base import WorkloadSpec

__all__ = ["DATASETS", "Dataset", "default_data_dir", "load_real", "synthetic"]

# dataset key (WorkloadSpec.dataset) -> loader
DATASETS: dict[str, Loader] = {
    "mnist": load_idx,
    "fashion_mnist": load_idx,
    "cifar10": load_cifar10,
    "imdb": load_imdb,
    "text": load_text,
    "weather": load_weather,
    # the names some workload specs use for the same data
    "tinyshakespeare": load_text,
    "jena_climate": load_weather,
}

_FILE_OK = ("text", "weather", "tinyshakespeare", "jena_climate")   # data_dir may name a single file


def load_real(spec: WorkloadSpec, data_dir: str | os.PathLike[str] | None, *, download: bool = False,
              train_samples: int | None = None, eval_samples: int | None = None, **options: Any) -> Dataset:
    """The real dataset of ``spec.dataset`` read from ``data_dir`` (default: $XPUBENCH_DATA_DIR or
    ~/.cache/xpubench/datasets), capped to the first ``train_samples`` / ``eval_samples`` samples.

    ``options`` go to the loader (only ``targets=[column, ...]`` for "weather" today).
    """
    loader = DATASETS.get(spec.dataset)
    if loader is None:
        raise UserError(f"workload {spec.name}: no real-data loader for dataset {spec.dataset!r} "
                        f"(known: {', '.join(DATASETS)}); use synthetic data")
    root = resolve_root(data_dir, download=download, allow_file=spec.dataset in _FILE_OK)
    ds = loader(spec, root, download=download, train_samples=train_samples, eval_samples=eval_samples,
                **options)
    return ds.head(train_samples, eval_samples)
