"""Download helper (monkeypatched network), checksum verification, data directory errors."""

from __future__ import annotations

import hashlib
import io
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from xpubench import data
from xpubench.data import download as dl
from xpubench.errors import DataUnavailable, UserError
from xpubench.workloads.base import WorkloadSpec


def spec(dataset: str, shape: tuple[int, ...] = (28, 28, 1), kind: str = "image") -> WorkloadSpec:
    return WorkloadSpec(name=f"{dataset}_w", title="t", dataset=dataset, input_shape=shape, input_kind=kind,
                        target_kind="class", num_outputs=10, loss="softmax_ce", metric="accuracy",
                        optimizer="adam", learning_rate=1e-3, batch_sizes=(32,), quick_batch_size=32,
                        epochs=1, train_samples=10, eval_samples=10,
                        vocab_size=256 if kind == "tokens" else None)


def serve(monkeypatch: pytest.MonkeyPatch, payload: bytes) -> list[str]:
    asked: list[str] = []

    def fake_urlopen(url: str, timeout: float | None = None) -> io.BytesIO:
        asked.append(url)
        return io.BytesIO(payload)

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    return asked


def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_urlopen(url: str, timeout: float | None = None) -> io.BytesIO:
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)


def test_fetch_verifies_before_moving(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = b"hello dataset"
    serve(monkeypatch, payload)
    dest = tmp_path / "sub" / "file.bin"
    assert dl.fetch("https://example.org/f", dest, hashlib.sha256(payload).hexdigest()) == dest
    assert dest.read_bytes() == payload
    assert [p.name for p in dest.parent.iterdir()] == ["file.bin"]


def test_fetch_checksum_mismatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serve(monkeypatch, b"tampered")
    dest = tmp_path / "file.bin"
    with pytest.raises(DataUnavailable, match="is not the published file"):
        dl.fetch("https://example.org/f", dest, "0" * 64)
    assert list(tmp_path.iterdir()) == []          # neither the file nor a temporary left behind


def test_fetch_size_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serve(monkeypatch, b"12345")
    with pytest.raises(DataUnavailable, match="has 5 bytes, the published file 6"):
        dl.fetch("https://example.org/f", tmp_path / "f", None, size=6)
    assert dl.fetch("https://example.org/f", tmp_path / "f", None, size=5).read_bytes() == b"12345"


def test_offline_download_is_data_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    offline(monkeypatch)
    with pytest.raises(DataUnavailable, match=r"cannot download mnist \(offline\?\): put train-images-"
                                              r"idx3-ubyte.gz, .* in .*mnist or pass --data-dir"):
        data.load_real(spec("mnist"), tmp_path, download=True)
    assert list((tmp_path / "mnist").iterdir()) == []
    with pytest.raises(DataUnavailable, match=r"cannot download cifar10 \(offline\?\)"):
        data.load_real(spec("cifar10", (32, 32, 3)), tmp_path, download=True)


def test_download_tries_mirrors_then_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = serve(monkeypatch, b"not the published file")
    with pytest.raises(DataUnavailable, match="not the published file"):
        data.load_real(spec("mnist"), tmp_path, download=True)
    assert [u.split("/")[2] for u in asked] == ["ossci-datasets.s3.amazonaws.com", "storage.googleapis.com"]


def test_no_download_without_asking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = serve(monkeypatch, b"")
    with pytest.raises(DataUnavailable, match="cifar10 data not found"):
        data.load_real(spec("cifar10", (32, 32, 3)), tmp_path)
    assert asked == []


def test_published_file_on_disk_verified(tmp_path: Path) -> None:
    corpus = tmp_path / "input.txt"
    corpus.write_bytes(b"x" * 1115394)       # the published size, not the published content
    with pytest.raises(UserError, match=r"input.txt has the size of the published text file but not its"):
        data.load_real(spec("text", (16,), "tokens"), tmp_path)
    corpus.write_bytes(b"x" * 1000)          # another size: another corpus, format-checked only
    ds = data.load_real(spec("text", (16,), "tokens"), tmp_path)
    assert "input.txt (unverified)" in ds.source


def test_missing_and_default_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError, match=r"data directory .*nowhere does not exist"):
        data.load_real(spec("mnist"), tmp_path / "nowhere")
    with pytest.raises(UserError, match="is a file; pass the folder"):
        (tmp_path / "f").write_bytes(b"")
        data.load_real(spec("mnist"), tmp_path / "f")
    monkeypatch.setenv("XPUBENCH_DATA_DIR", str(tmp_path / "cache"))
    assert data.default_data_dir() == tmp_path / "cache"
    with pytest.raises(UserError, match=r"data directory .*cache does not exist"):
        data.load_real(spec("mnist"), None)
    offline(monkeypatch)
    with pytest.raises(DataUnavailable):
        data.load_real(spec("mnist"), None, download=True)
    assert (tmp_path / "cache").is_dir()


def test_unknown_dataset(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no real-data loader for dataset 'imagenet'"):
        data.load_real(spec("imagenet"), tmp_path)


def test_table_is_consistent() -> None:
    assert set(dl.PUBLISHED) <= set(data.DATASETS)
    for files in dl.PUBLISHED.values():
        for entry in files.values():
            assert entry.urls and all(u.startswith(("https://", "http://")) for u in entry.urls)
            assert entry.sha256 is None or len(entry.sha256) == 64
            assert entry.sha256 is not None or entry.size is not None
