"""The Dataset record and the small helpers every loader shares (folders, splits, sample caps)."""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from xpubench import envnames
from xpubench.errors import UserError

if TYPE_CHECKING:
    from xpubench.workloads.base import WorkloadSpec

DATA_DIR_ENV = envnames.DATA_DIR
DEFAULT_DATA_DIR = Path("~/.cache/xpubench/datasets")


@dataclass
class Dataset:
    """Train and test arrays already in the model's input format, and where they came from."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str

    def head(self, train_samples: int | None, eval_samples: int | None) -> Dataset:
        """The first ``train_samples`` / ``eval_samples`` samples (all of them where None or larger)."""
        return Dataset(head(self.x_train, train_samples), head(self.y_train, train_samples),
                       head(self.x_test, eval_samples), head(self.y_test, eval_samples), self.source)

    def describe(self) -> str:
        """One line: shapes and dtypes of the four arrays."""
        return (f"x_train {self.x_train.shape} {self.x_train.dtype}, y_train {self.y_train.shape} "
                f"{self.y_train.dtype}, x_test {self.x_test.shape}, y_test {self.y_test.shape}")


class Loader(Protocol):
    """A real-data loader: reads (or downloads into) ``root`` and returns the whole Dataset."""

    def __call__(self, spec: WorkloadSpec, root: Path, *, download: bool, train_samples: int | None,
                 eval_samples: int | None, **options: Any) -> Dataset: ...


def head(arr: np.ndarray, n: int | None) -> np.ndarray:
    """The first n rows of arr (all of it where n is None or too large)."""
    return arr if n is None or n >= len(arr) else arr[:n]


def default_data_dir() -> Path:
    """$XPUBENCH_DATA_DIR, else ~/.cache/xpubench/datasets: where data goes when no folder is given."""
    return Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR).expanduser()


def resolve_root(data_dir: str | os.PathLike[str] | None, *, download: bool, allow_file: bool) -> Path:
    """The folder (or, where ``allow_file``, the file) to read; a missing one is a UserError.

    With no ``data_dir`` the default cache folder is used, created only when downloading is allowed.
    """
    if data_dir is None:
        root = default_data_dir()
        if not root.exists():
            if not download:
                raise UserError(f"data directory {root} does not exist: pass --data-dir DIR "
                                f"(or set {DATA_DIR_ENV}), or add --download when online")
            try:
                root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UserError(f"cannot create data directory {root}: {exc.strerror}") from None
        return root
    root = Path(data_dir).expanduser()
    if not root.exists():
        raise UserError(f"data directory {root} does not exist; check --data-dir")
    if root.is_file() and not allow_file:
        raise UserError(f"{root} is a file; pass the folder that holds the dataset's files as --data-dir")
    return root


def candidate_dirs(root: Path, names: Iterable[str]) -> list[Path]:
    """``root/<name>`` for each name that is a folder, then ``root`` itself."""
    found = [root / n for n in names if (root / n).is_dir()]
    return [*found, root]


def find_one(folder: Path, names: Iterable[str]) -> Path | None:
    """The first of ``folder/<name>`` that is a file, or None."""
    for name in names:
        path = folder / name
        if path.is_file():
            return path
    return None


def split_point(n: int, test_fraction: float, what: str) -> int:
    """Index that splits n ordered samples into a train part and a ``test_fraction`` test part."""
    n_test = round(n * test_fraction)
    if n < 2 or n_test < 1 or n_test >= n:
        raise UserError(f"{what}: {n} sample(s) are too few to split into a train and a test part")
    return n - n_test


MAX_DATA_BYTES = 1 << 30   # one dataset file as read (decompressed): MNIST's largest is 47 MB, EMNIST's 548 MB


def read_bytes(path: Path, limit: int = MAX_DATA_BYTES) -> bytes:
    """A file's bytes, gunzipped where the name ends in .gz, at most ``limit`` of them: the size is
    checked while decompressing, so a small gzip bomb is refused before it fills memory. Unreadable,
    not a regular file, broken gzip or too large -> UserError."""
    with open_data(path) as fh:
        data = read_up_to(fh, path, limit + 1)
    if len(data) > limit:
        grown = " once decompressed" if path.suffix == ".gz" else ""
        raise UserError(f"{path} holds more than {limit >> 20} MiB{grown}: not a dataset file xpubench reads "
                        "(check or delete it)")
    return data


def open_data(path: Path):
    """A dataset file opened for reading (a regular file only; decompressed as read when it ends in .gz)."""
    from xpubench import readfile

    fh = readfile.open_regular(path, "data file")
    return gzip.GzipFile(fileobj=fh, mode="rb") if path.suffix == ".gz" else fh


def read_up_to(fh, path: Path, size: int) -> bytes:
    """At most ``size`` bytes of ``fh`` (open_data), decompressing only that much; a broken gzip or a
    read error -> UserError."""
    try:
        return fh.read(size)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise UserError(f"{path} is not a complete gzip file ({exc}); download it again") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None


def check_options(options: dict[str, Any], allowed: Iterable[str], dataset: str) -> None:
    """Refuse loader options the dataset does not know."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        known = ", ".join(sorted(allowed)) or "none"
        raise UserError(f"dataset {dataset} has no option {', '.join(unknown)} (options: {known})")


def seq_len(spec: WorkloadSpec, what: str) -> int:
    """The sequence length T of a token or series workload (``spec.input_shape[0]``)."""
    if not spec.input_shape or spec.input_shape[0] < 1:
        raise UserError(f"{what}: workload {spec.name} has no sequence length in input_shape "
                        f"{spec.input_shape}")
    return int(spec.input_shape[0])
