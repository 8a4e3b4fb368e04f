"""MNIST-style IDX and CIFAR-10 binary loaders on small files written in the real formats."""

from __future__ import annotations

import gzip
import io
import struct
import tarfile
from pathlib import Path

import numpy as np
import pytest

from xpubench import data
from xpubench.data.archive import safe_extract
from xpubench.errors import DataUnavailable, UserError
from xpubench.workloads.base import WorkloadSpec


def image_spec(dataset: str = "mnist", shape: tuple[int, ...] = (28, 28, 1)) -> WorkloadSpec:
    return WorkloadSpec(name=f"{dataset}_cnn", title="t", dataset=dataset, input_shape=shape,
                        input_kind="image", target_kind="class", num_outputs=10, loss="softmax_ce",
                        metric="accuracy", optimizer="adam", learning_rate=1e-3, batch_sizes=(32,),
                        quick_batch_size=32, epochs=1, train_samples=100, eval_samples=100)


def idx_bytes(arr: np.ndarray, magic: int) -> bytes:
    return struct.pack(f">I{arr.ndim}I", magic, *arr.shape) + arr.astype(np.uint8).tobytes()


def write_idx(folder: Path, stem: str, arr: np.ndarray, magic: int, gz: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    payload = idx_bytes(arr, magic)
    path = folder / (stem + (".gz" if gz else ""))
    path.write_bytes(gzip.compress(payload) if gz else payload)
    return path


def write_mnist(folder: Path, n_train: int = 30, n_test: int = 20, *, gz: bool = True,
                splits: tuple[str, ...] = ("train", "t10k")) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    out = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        if split not in splits:
            continue
        x = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        y = rng.integers(0, 10, n, dtype=np.uint8)
        write_idx(folder, f"{split}-images-idx3-ubyte", x, 2051, gz)
        write_idx(folder, f"{split}-labels-idx1-ubyte", y, 2049, gz)
        out[split] = (x, y)
    return out


@pytest.mark.parametrize("gz", [True, False])
def test_idx_both_splits(tmp_path: Path, gz: bool) -> None:
    arrays = write_mnist(tmp_path / "mnist", gz=gz)
    ds = data.load_real(image_spec(), tmp_path)
    assert ds.x_train.shape == (30, 28, 28, 1) and ds.x_train.dtype == np.float32
    assert ds.y_train.dtype == np.int32 and ds.x_test.shape == (20, 28, 28, 1)
    x, _ = arrays["train"]
    np.testing.assert_allclose(ds.x_train[..., 0], x / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(ds.y_test, arrays["t10k"][1])
    assert ds.x_train.min() >= 0.0 and ds.x_train.max() <= 1.0
    assert "unverified" in ds.source


def test_idx_caps_and_lone_split(tmp_path: Path) -> None:
    write_mnist(tmp_path, n_test=50, splits=("t10k",))
    ds = data.load_real(image_spec("fashion_mnist"), tmp_path)
    assert (len(ds.x_train), len(ds.x_test)) == (40, 10)
    assert "only the test split" in ds.source
    capped = data.load_real(image_spec("fashion_mnist"), tmp_path, train_samples=7, eval_samples=3)
    assert (len(capped.x_train), len(capped.y_test)) == (7, 3)


def test_idx_bad_magic(tmp_path: Path) -> None:
    write_mnist(tmp_path)
    write_idx(tmp_path, "train-labels-idx1-ubyte", np.zeros(30, np.uint8), 2051)
    with pytest.raises(UserError, match=r"train-labels-idx1-ubyte.gz is not an IDX labels file \(magic"):
        data.load_real(image_spec(), tmp_path)


def test_idx_truncated(tmp_path: Path) -> None:
    write_mnist(tmp_path, gz=False)
    path = tmp_path / "t10k-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(UserError, match="t10k-images-idx3-ubyte is truncated"):
        data.load_real(image_spec(), tmp_path)


def test_idx_truncated_gzip(tmp_path: Path) -> None:
    write_mnist(tmp_path)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(UserError, match="not a complete gzip file"):
        data.load_real(image_spec(), tmp_path)


def test_idx_count_mismatch(tmp_path: Path) -> None:
    write_mnist(tmp_path)
    write_idx(tmp_path, "train-labels-idx1-ubyte", np.zeros(29, np.uint8), 2049)
    with pytest.raises(UserError, match=r"holds 30 images but .* holds 29 labels"):
        data.load_real(image_spec(), tmp_path)


def test_idx_missing_partner_and_bad_label(tmp_path: Path) -> None:
    write_mnist(tmp_path)
    (tmp_path / "train-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(UserError, match="has no partner"):
        data.load_real(image_spec(), tmp_path)
    write_idx(tmp_path, "train-labels-idx1-ubyte", np.full(30, 12, np.uint8), 2049)
    with pytest.raises(UserError, match="label 12"):
        data.load_real(image_spec(), tmp_path)


def test_idx_published_size_checksum_mismatch(tmp_path: Path) -> None:
    # 10,000 labels make a raw file of exactly the published size (10,008 bytes), but not its content
    write_mnist(tmp_path)
    write_idx(tmp_path, "t10k-labels-idx1-ubyte", np.zeros(10000, np.uint8), 2049, gz=False)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(UserError, match="has the size of the published mnist file but not its sha256"):
        data.load_real(image_spec(), tmp_path)


def test_idx_missing_files(tmp_path: Path) -> None:
    with pytest.raises(DataUnavailable, match=r"mnist data not found: put train-images-idx3-ubyte\.gz"):
        data.load_real(image_spec(), tmp_path)


def cifar_records(n: int, seed: int = 0) -> tuple[bytes, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n, dtype=np.uint8)
    chw = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
    raw = np.concatenate([labels[:, None], chw.reshape(n, -1)], axis=1).tobytes()
    return raw, labels, chw


def test_cifar_bins(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    raw1, y1, x1 = cifar_records(6, 1)
    raw2, y2, _ = cifar_records(4, 2)
    raw_t, y_t, _ = cifar_records(5, 3)
    (folder / "data_batch_1.bin").write_bytes(raw1)
    (folder / "data_batch_2.bin").write_bytes(raw2)
    (folder / "test_batch.bin").write_bytes(raw_t)
    ds = data.load_real(image_spec("cifar10", (32, 32, 3)), tmp_path)
    assert ds.x_train.shape == (10, 32, 32, 3) and ds.x_train.dtype == np.float32
    np.testing.assert_array_equal(ds.y_train, np.concatenate([y1, y2]))
    np.testing.assert_array_equal(ds.y_test, y_t)
    # CHW planes -> HWC: pixel (row 3, col 5) of channel 2
    assert ds.x_train[0, 3, 5, 2] == pytest.approx(x1[0, 2, 3, 5] / 255.0)


def test_cifar_wrong_size(tmp_path: Path) -> None:
    raw, _, _ = cifar_records(3)
    (tmp_path / "data_batch_1.bin").write_bytes(raw[:-1])
    (tmp_path / "test_batch.bin").write_bytes(raw)
    with pytest.raises(UserError, match="not a whole number of 3073-byte CIFAR-10 records"):
        data.load_real(image_spec("cifar10", (32, 32, 3)), tmp_path)


def make_tar(path: Path, members: dict[str, bytes], link: tuple[str, str] | None = None) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, payload in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
        if link is not None:
            info = tarfile.TarInfo(link[0])
            info.type = tarfile.SYMTYPE
            info.linkname = link[1]
            tar.addfile(info)


def test_cifar_archive(tmp_path: Path) -> None:
    raw, y, _ = cifar_records(10)
    make_tar(tmp_path / "cifar-10-binary.tar.gz",
             {"cifar-10-batches-bin/data_batch_1.bin": raw,
              "cifar-10-batches-bin/test_batch.bin": raw[:3073 * 4],
              "cifar-10-batches-bin/readme.html": b"<html>"})
    ds = data.load_real(image_spec("cifar10", (32, 32, 3)), tmp_path)
    assert ds.x_train.shape == (10, 32, 32, 3) and ds.x_test.shape == (4, 32, 32, 3)
    np.testing.assert_array_equal(ds.y_train, y)
    assert (tmp_path / "cifar-10-batches-bin" / "data_batch_1.bin").is_file()
    assert not (tmp_path / "cifar-10-batches-bin" / "readme.html").exists()


@pytest.mark.parametrize("name", ["../evil.bin", "/tmp/evil.bin", "cifar-10-batches-bin/../../evil.bin"])
def test_archive_path_traversal_refused(tmp_path: Path, name: str) -> None:
    target = tmp_path / "t"
    target.mkdir()
    make_tar(tmp_path / "bad.tar.gz", {"ok/fine.bin": b"x", name: b"evil"})
    with pytest.raises(UserError, match="refusing to extract member"):
        safe_extract(tmp_path / "bad.tar.gz", target)
    assert not (tmp_path / "evil.bin").exists() and not (target / "ok").exists()


def test_archive_symlink_refused(tmp_path: Path) -> None:
    make_tar(tmp_path / "cifar-10-binary.tar.gz", {"cifar-10-batches-bin/test_batch.bin": b"x" * 3073},
             link=("cifar-10-batches-bin/data_batch_1.bin", "/etc/passwd"))
    with pytest.raises(UserError, match=r"refusing to extract member .*data_batch_1.bin' \(a link\)"):
        data.load_real(image_spec("cifar10", (32, 32, 3)), tmp_path)


def test_archive_corrupt(tmp_path: Path) -> None:
    (tmp_path / "cifar-10-binary.tar.gz").write_bytes(b"\x1f\x8b\x08\x00garbage" * 10)
    with pytest.raises(UserError, match="cannot read archive"):
        data.load_real(image_spec("cifar10", (32, 32, 3)), tmp_path)
