"""Image datasets: MNIST and Fashion-MNIST (IDX files) and CIFAR-10 (binary version).

Where to look, in order: ``DIR/<key>/`` (``mnist``, ``fashion_mnist``, ``cifar10`` ...), then ``DIR``
itself. Downloads go to ``DIR/<key>/`` (MNIST and Fashion-MNIST share file names).
"""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xpubench.data import download as dl
from xpubench.data.archive import safe_extract
from xpubench.data.core import (
    MAX_DATA_BYTES,
    Dataset,
    candidate_dirs,
    check_options,
    find_one,
    open_data,
    read_up_to,
    split_point,
)
from xpubench.errors import UserError

if TYPE_CHECKING:
    from xpubench.workloads.base import WorkloadSpec

IDX_IMAGES_MAGIC = 2051     # 0x00000803: unsigned bytes, 3 dimensions
IDX_LABELS_MAGIC = 2049     # 0x00000801: unsigned bytes, 1 dimension
IDX_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
IDX_SUBDIRS = {"mnist": ("mnist", "MNIST", "MNIST/raw"),
               "fashion_mnist": ("fashion_mnist", "fashion-mnist", "FashionMNIST", "FashionMNIST/raw")}
SPLIT_TEST_FRACTION = 0.2    # a lone split is cut into its first 80% (train) and last 20% (test)

CIFAR_RECORD = 1 + 3 * 32 * 32
CIFAR_ARCHIVE = "cifar-10-binary.tar.gz"
CIFAR_FOLDER = "cifar-10-batches-bin"
CIFAR_TRAIN = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
CIFAR_TEST = "test_batch.bin"


def parse_idx(data: bytes, magic: int, path: Path) -> np.ndarray:
    """The uint8 array of an IDX file's bytes; wrong magic, dimensions or length -> UserError."""
    ndim = magic & 0xFF
    if len(data) < 4 + 4 * ndim:
        raise UserError(f"{path} is truncated ({len(data)} bytes, not even an IDX header); download it again")
    found = struct.unpack(">I", data[:4])[0]
    if found != magic:
        kind = "images" if magic == IDX_IMAGES_MAGIC else "labels"
        raise UserError(f"{path} is not an IDX {kind} file (magic number {found}, expected {magic}); "
                        f"check the file name and content")
    dims = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    if any(d == 0 for d in dims):
        raise UserError(f"{path}: IDX dimensions {dims} hold no data")
    expected = math.prod(dims)   # a Python int: dimensions near 2^32 each can't overflow it
    if expected > MAX_DATA_BYTES:
        raise UserError(f"{path}: IDX dimensions {dims} describe {expected:,} bytes, more than xpubench reads "
                        f"({MAX_DATA_BYTES >> 20} MiB); check the file")
    body = len(data) - 4 - 4 * ndim
    if body != expected:
        state = "truncated" if body < expected else "longer than its header says"
        raise UserError(f"{path} is {state} ({body} data bytes for dimensions {dims}, expected {expected}); "
                        f"download it again")
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def read_idx_bytes(path: Path, magic: int) -> bytes:
    """An IDX file's header, then no more data than its dimensions say (+1 byte, to tell a file longer
    than its header): a gzip bomb is never decompressed past what parse_idx would accept."""
    ndim = magic & 0xFF
    with open_data(path) as fh:
        head = read_up_to(fh, path, 4 + 4 * ndim)
        if len(head) < 4 + 4 * ndim or struct.unpack(">I", head[:4])[0] != magic:
            return head   # parse_idx says what is wrong
        dims = struct.unpack(f">{ndim}I", head[4:])
        expected = math.prod(dims)
        return head + (read_up_to(fh, path, expected + 1) if 0 < expected <= MAX_DATA_BYTES else b"")


def _idx_file(folder: Path, stem: str) -> Path | None:
    return find_one(folder, (stem + ".gz", stem))


def _read_idx_pair(images: Path, labels: Path, dataset: str, num_classes: int,
                   notes: list[str]) -> tuple[np.ndarray, np.ndarray]:
    arrays = []
    for path, magic in ((images, IDX_IMAGES_MAGIC), (labels, IDX_LABELS_MAGIC)):
        data = read_idx_bytes(path, magic)
        arrays.append(parse_idx(data, magic, path))
        notes.append(f"{path.name} ({dl.verify(path, dataset, data)})")
    x, y = arrays
    if len(x) != len(y):
        raise UserError(f"{images} holds {len(x)} images but {labels} holds {len(y)} labels; "
                        f"they must come from the same split")
    if y.max() >= num_classes:
        raise UserError(f"{labels} has label {int(y.max())}, but the workload has {num_classes} classes")
    return x, y


def _images(x: np.ndarray) -> np.ndarray:
    """uint8 (N, H, W[, C]) -> float32 NHWC in [0, 1]."""
    if x.ndim == 3:
        x = x[..., None]
    out = x.astype(np.float32)
    out *= np.float32(1.0 / 255.0)
    return out


def _image_dataset(x_tr: np.ndarray, y_tr: np.ndarray, x_te: np.ndarray, y_te: np.ndarray, source: str,
                   train_samples: int | None, eval_samples: int | None) -> Dataset:
    """Caps applied on the uint8 arrays first, so only the samples used are converted to float32."""
    n_tr = len(x_tr) if train_samples is None else min(train_samples, len(x_tr))
    n_te = len(x_te) if eval_samples is None else min(eval_samples, len(x_te))
    return Dataset(_images(x_tr[:n_tr]), y_tr[:n_tr].astype(np.int32),
                   _images(x_te[:n_te]), y_te[:n_te].astype(np.int32), source)


def _split_lone(x: np.ndarray, y: np.ndarray, what: str) -> tuple[np.ndarray, ...]:
    cut = split_point(len(x), SPLIT_TEST_FRACTION, what)
    return x[:cut], y[:cut], x[cut:], y[cut:]


def load_idx(spec: WorkloadSpec, root: Path, *, download: bool, train_samples: int | None = None,
             eval_samples: int | None = None, **options: Any) -> Dataset:
    """MNIST / Fashion-MNIST from IDX files (gzip or raw); a lone split is cut 80/20 into train/test."""
    dataset = spec.dataset
    check_options(options, (), dataset)
    folders = candidate_dirs(root, IDX_SUBDIRS.get(dataset, (dataset,)))
    folder = next((f for f in folders if any(_idx_file(f, s) for pair in IDX_FILES.values() for s in pair)),
                  None)
    if folder is None:
        target = root / dataset
        names = list(dl.PUBLISHED[dataset])
        if not download:
            raise dl.missing(dataset, names, root, download=False)
        dl.download_published(dataset, names, target, hint=f"put {', '.join(names)} in {target} "
                                                            f"or pass --data-dir")
        folder = target
    found = {split: tuple(_idx_file(folder, s) for s in stems) for split, stems in IDX_FILES.items()}
    for split, (img, lab) in found.items():
        if (img is None) != (lab is None):
            have, need = (img, IDX_FILES[split][1]) if lab is None else (lab, IDX_FILES[split][0])
            raise UserError(f"{have} has no partner: put {need}(.gz) in {folder} too")
    notes: list[str] = []
    pairs = {split: _read_idx_pair(p[0], p[1], dataset, spec.num_outputs, notes)
             for split, p in found.items() if p[0] is not None and p[1] is not None}
    if len(pairs) == 2:
        (x_tr, y_tr), (x_te, y_te) = pairs["train"], pairs["test"]
        how = "train and test splits"
    else:
        split, (x, y) = next(iter(pairs.items()))
        x_tr, y_tr, x_te, y_te = _split_lone(x, y, f"{dataset} {split} split")
        how = (f"only the {split} split is present: its first {len(x_tr)} samples train, "
               f"the last {len(x_te)} test")
    source = f"{dataset} IDX files in {folder}: {', '.join(notes)}; {how}"
    return _image_dataset(x_tr, y_tr, x_te, y_te, source, train_samples, eval_samples)


def parse_cifar(path: Path, num_classes: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 images NHWC, uint8 labels) of one CIFAR-10 binary batch file."""
    try:
        raw = np.fromfile(path, dtype=np.uint8)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    if raw.size == 0 or raw.size % CIFAR_RECORD:
        raise UserError(f"{path} has {raw.size} bytes, not a whole number of {CIFAR_RECORD}-byte CIFAR-10 "
                        f"records (truncated, or not the CIFAR-10 binary version); download it again")
    records = raw.reshape(-1, CIFAR_RECORD)
    labels = records[:, 0]
    if labels.max() >= num_classes:
        bad = int(np.argmax(labels >= num_classes))
        raise UserError(f"{path}: record {bad} has label {int(labels[bad])}, not a CIFAR-10 class "
                        f"(is it CIFAR-100?)")
    images = records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return images, labels


def _cifar_folder(root: Path) -> Path | None:
    for folder in candidate_dirs(root, (CIFAR_FOLDER, f"cifar10/{CIFAR_FOLDER}", "cifar10")):
        if find_one(folder, (*CIFAR_TRAIN, CIFAR_TEST)):
            return folder
    return None


def load_cifar10(spec: WorkloadSpec, root: Path, *, download: bool, train_samples: int | None = None,
                 eval_samples: int | None = None, **options: Any) -> Dataset:
    """CIFAR-10 binary batches (.bin files, or the cifar-10-binary.tar.gz archive, extracted safely)."""
    check_options(options, (), "cifar10")
    folder = _cifar_folder(root)
    notes: list[str] = []
    if folder is None:
        archive = None
        for where in candidate_dirs(root, ("cifar10",)):
            archive = find_one(where, (CIFAR_ARCHIVE,))
            if archive is not None:
                break
        if archive is None:
            if not download:
                raise dl.missing("cifar10", [CIFAR_ARCHIVE + " (or its .bin files)"], root, download=False)
            archive = dl.download_published("cifar10", [CIFAR_ARCHIVE], root / "cifar10")[0]
        notes.append(f"{archive.name} ({dl.verify(archive, 'cifar10')})")
        safe_extract(archive, archive.parent, keep=lambda name: name.endswith(".bin"))
        folder = _cifar_folder(archive.parent)
        if folder is None:
            raise UserError(f"{archive} holds no CIFAR-10 .bin batch files; is it the binary version?")
    train_files = [p for p in (folder / n for n in CIFAR_TRAIN) if p.is_file()]
    test_file = find_one(folder, (CIFAR_TEST,))
    parts = {"train": [parse_cifar(p, spec.num_outputs) for p in train_files],
             "test": [parse_cifar(test_file, spec.num_outputs)] if test_file else []}
    notes.append(", ".join(p.name for p in [*train_files, *([test_file] if test_file else [])]))
    joined = {k: (np.concatenate([a for a, _ in v]), np.concatenate([b for _, b in v]))
              for k, v in parts.items() if v}
    if len(joined) == 2:
        (x_tr, y_tr), (x_te, y_te) = joined["train"], joined["test"]
        how = "train and test batches"
    else:
        split, (x, y) = next(iter(joined.items()))
        x_tr, y_tr, x_te, y_te = _split_lone(x, y, f"cifar10 {split} batches")
        how = f"only {split} batches present: first {len(x_tr)} samples train, the last {len(x_te)} test"
    source = f"cifar10 binary batches in {folder}: {'; '.join(notes)}; {how}"
    return _image_dataset(x_tr, y_tr, x_te, y_te, source, train_samples, eval_samples)
