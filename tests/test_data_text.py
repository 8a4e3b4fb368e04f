"""IMDB-style sentiment (aclImdb folders, npz, sentence polarity) and the byte-level text corpus."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest

from xpubench import data
from xpubench.data.imdb import OOV, START, build_vocab, encode, tokenize
from xpubench.errors import UserError
from xpubench.workloads.base import WorkloadSpec


def imdb_spec(length: int = 12, vocab: int = 20) -> WorkloadSpec:
    return WorkloadSpec(name="imdb_lstm", title="t", dataset="imdb", input_shape=(length,),
                        input_kind="tokens", target_kind="binary", num_outputs=1, loss="sigmoid_bce",
                        metric="accuracy", optimizer="adam", learning_rate=1e-3, batch_sizes=(32,),
                        quick_batch_size=32, epochs=1, train_samples=100, eval_samples=100, vocab_size=vocab)


def char_spec(length: int = 8) -> WorkloadSpec:
    return WorkloadSpec(name="char_lstm", title="t", dataset="text", input_shape=(length,),
                        input_kind="tokens", target_kind="token_seq", num_outputs=256, loss="softmax_ce",
                        metric="accuracy", optimizer="adam", learning_rate=1e-3, batch_sizes=(32,),
                        quick_batch_size=32, epochs=1, train_samples=100, eval_samples=100, vocab_size=256,
                        target_shape=(length,))


REVIEWS = {
    ("train", "pos"): ["A great film.<br />Great acting!", "great fun, don't miss it", "loved it"],
    ("train", "neg"): ["A bad film", "bad, bad acting", "boring and bad"],
    ("test", "pos"): ["great", "wonderful film"],
    ("test", "neg"): ["awful film", "bad"],
}


def write_acl(root: Path) -> Path:
    for (split, label), texts in REVIEWS.items():
        folder = root / "aclImdb" / split / label
        folder.mkdir(parents=True)
        for i, text in enumerate(texts):
            (folder / f"{i}_7.txt").write_text(text, encoding="utf-8")
    (root / "aclImdb" / "train" / "unsup").mkdir()
    return root / "aclImdb"


def test_tokenizer_and_encoding() -> None:
    words = ["a", "great", "film", "don't", "miss", "it", "café"]
    assert tokenize("A great film.<br />Don't MISS it, café!") == words
    vocab = build_vocab([["b", "a", "a"], ["c", "b", "d"]], vocab_size=5)
    assert vocab == {"a": 3, "b": 4}     # ties broken alphabetically: "a"(2) "b"(2) then c, d cut
    x = encode([["a", "zzz"], ["b"] * 10], vocab, 4)
    np.testing.assert_array_equal(x, [[0, START, 3, OOV], [4, 4, 4, 4]])
    assert x.dtype == np.int32


def test_acl_folder(tmp_path: Path) -> None:
    write_acl(tmp_path)
    ds = data.load_real(imdb_spec(), tmp_path)
    assert ds.x_train.shape == (6, 12) and ds.x_train.dtype == np.int32
    assert ds.y_train.shape == (6,) and ds.y_train.dtype == np.float32
    assert sorted(ds.y_train.tolist()) == [0, 0, 0, 1, 1, 1] and sorted(ds.y_test.tolist()) == [0, 0, 1, 1]
    assert ds.x_train.max() < 20 and (ds.x_train[:, -1] > 0).all()
    assert (ds.x_train == START).sum() == 6
    again = data.load_real(imdb_spec(), tmp_path / "aclImdb")       # the aclImdb folder itself
    np.testing.assert_array_equal(again.x_train, ds.x_train)
    capped = data.load_real(imdb_spec(), tmp_path, train_samples=2, eval_samples=1)
    assert capped.x_train.shape == (2, 12) and capped.y_test.shape == (1,)


def test_acl_archive(tmp_path: Path) -> None:
    src = tmp_path / "src"
    write_acl(src)
    with tarfile.open(tmp_path / "aclImdb_v1.tar.gz", "w:gz") as tar:
        tar.add(src / "aclImdb", arcname="aclImdb")
        info = tarfile.TarInfo("aclImdb/README")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    root = tmp_path / "data"
    root.mkdir()
    (tmp_path / "aclImdb_v1.tar.gz").rename(root / "aclImdb_v1.tar.gz")
    ds = data.load_real(imdb_spec(), root)
    assert ds.x_train.shape == (6, 12) and "aclImdb_v1.tar.gz" in ds.source
    assert not (root / "aclImdb" / "README").exists()


def test_npz_plain_arrays_and_pickled_refused(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 40, (5, 20))
    np.savez(tmp_path / "imdb.npz", x_train=x, y_train=np.array([0, 1, 0, 1, 1]), x_test=x[:2, :5],
             y_test=np.array([1, 0]))
    ds = data.load_real(imdb_spec(), tmp_path)
    assert ds.x_train.shape == (5, 12) and ds.x_test.shape == (2, 12)
    np.testing.assert_array_equal(ds.x_train, np.where(x >= 20, OOV, x)[:, -12:])
    assert (ds.x_test[:, :7] == 0).all()
    seqs = np.empty(2, dtype=object)
    seqs[0], seqs[1] = [1, 2, 3], [1, 5]
    labels = np.array([0, 1])
    np.savez(tmp_path / "imdb.npz", x_train=seqs, y_train=labels, x_test=seqs, y_test=labels)
    with pytest.raises(UserError, match="stores Python objects \\(pickle\\), which xpubench never loads"):
        data.load_real(imdb_spec(), tmp_path)


def test_polarity(tmp_path: Path) -> None:
    folder = tmp_path / "rt-polarity"
    folder.mkdir()
    (folder / "rt-polarity.pos").write_bytes("a charming , caf\xe9 movie\n".encode("latin-1") * 10)
    (folder / "rt-polarity.neg").write_bytes(b"dull and slow .\n" * 10)
    ds = data.load_real(imdb_spec(), tmp_path)
    assert (len(ds.x_train), len(ds.x_test)) == (16, 4)
    assert ds.y_train.sum() + ds.y_test.sum() == 10
    assert "café" in tokenize("caf\xe9")


def test_imdb_nothing_there(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no imdb data in"):
        data.load_real(imdb_spec(), tmp_path)


def test_text_windows(tmp_path: Path) -> None:
    text = bytes(range(32, 127)) * 3       # 285 bytes -> 31 windows of 9
    (tmp_path / "corpus.txt").write_bytes(text)
    ds = data.load_real(char_spec(8), tmp_path / "corpus.txt")
    assert ds.x_train.shape == (28, 8) and ds.x_test.shape == (3, 8)
    assert ds.x_train.dtype == np.int32 and ds.y_train.dtype == np.int32
    arr = np.frombuffer(text, np.uint8)
    np.testing.assert_array_equal(ds.x_train[1], arr[9:17])
    np.testing.assert_array_equal(ds.y_train[1], arr[10:18])
    same = data.load_real(char_spec(8), tmp_path)        # the folder's one .txt file
    np.testing.assert_array_equal(same.y_test, ds.y_test)


def test_text_too_short_and_missing(tmp_path: Path) -> None:
    (tmp_path / "input.txt").write_bytes(b"tiny")
    with pytest.raises(UserError, match="too few for two windows"):
        data.load_real(char_spec(8), tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match="no text corpus in"):
        data.load_real(char_spec(8), empty)
