"""IMDB-style sentiment (aclImdb folders, Keras and plain npz, sentence polarity) and the byte-level text corpus."""

from __future__ import annotations

import io
import os
import pickle
import re
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from xpubench import data
from xpubench.cli import main
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


def test_npz_plain_arrays(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 40, (5, 20))
    np.savez(tmp_path / "imdb.npz", x_train=x, y_train=np.array([0, 1, 0, 1, 1]), x_test=x[:2, :5],
             y_test=np.array([1, 0]))
    ds = data.load_real(imdb_spec(), tmp_path)
    assert ds.x_train.shape == (5, 12) and ds.x_test.shape == (2, 12)
    np.testing.assert_array_equal(ds.x_train, np.where(x >= 20, OOV, x)[:, -12:])
    assert (ds.x_test[:, :7] == 0).all()


def reviews(*seqs: list[int]) -> np.ndarray:
    out = np.empty(len(seqs), dtype=object)
    out[:] = [list(s) for s in seqs]
    return out


def write_npy_member(folder: Path, members: dict[str, bytes]) -> Path:
    """An imdb.npz whose members are the given raw .npy bytes (header + payload)."""
    path = folder / "imdb.npz"
    with zipfile.ZipFile(path, "w") as z:
        for name, raw in members.items():
            z.writestr(f"{name}.npy", raw)
    return path


def object_npy(payload: bytes, n: int) -> bytes:
    """A .npy file of a 1-D object array of n items whose pickle is ``payload``, as numpy writes it."""
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "|O", "fortran_order": False, "shape": (n,)})
    return head.getvalue() + payload


def plain_npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


# x_train of 2 reviews, [1, 2] and [4, 300], as Python 2's numpy pickled it (protocol 2: GLOBAL opcodes,
# numpy.core, str as SHORT_BINSTRING, the dtype flags as ints): the era the Keras imdb.npz comes from.
PY2_PICKLE = (b"\x80\x02cnumpy.core.multiarray\n_reconstruct\nq\x00cnumpy\nndarray\nq\x01K\x00\x85U\x01b\x87R"
              b"(K\x01K\x02\x85cnumpy\ndtype\nU\x02O8K\x00K\x01\x87R(K\x03U\x01|NNNJ\xff\xff\xff\xffJ\xff\xff"
              b"\xff\xffK?tb\x89](](K\x01K\x02e](K\x04M,\x01eetb.")


def test_keras_imdb_npz_is_read_without_unpickling(tmp_path: Path) -> None:
    """The standard Keras imdb.npz layout (object arrays of word-rank lists, int labels), as numpy
    writes it today (protocol 4) and with protocol 2: read like keras.datasets.imdb.load_data."""
    long = list(range(1, 16))  # 15 ranks: cut to the last 12 ids; ranks >= 17 become OOV (vocabulary 20)
    x_train = reviews([1, 2, 3], long, [16, 17, 40], [5], [7, 7], [2])
    y_train = np.array([1, 0, 1, 0, 0, 1])
    x_test, y_test = reviews([9, 8], [3]), np.array([0, 1])
    np.savez(tmp_path / "imdb.npz", x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
    ds = data.load_real(imdb_spec(), tmp_path)
    assert "Keras word indices" in ds.source and ds.x_train.dtype == np.int32
    rng = np.random.RandomState(113)  # keras.datasets.imdb.load_data: train shuffled, then test, one RNG
    order_train, order_test = np.arange(6), np.arange(2)
    rng.shuffle(order_train)
    rng.shuffle(order_test)
    np.testing.assert_array_equal(ds.y_train, y_train[order_train])
    np.testing.assert_array_equal(ds.y_test, y_test[order_test])
    rows = {tuple(x_train[i]): ds.x_train[row] for row, i in enumerate(order_train)}
    np.testing.assert_array_equal(rows[(1, 2, 3)], [0] * 8 + [START, 4, 5, 6])
    np.testing.assert_array_equal(rows[tuple(long)], [r + 3 for r in long][-12:])   # the last 12 ids
    np.testing.assert_array_equal(rows[(16, 17, 40)][-4:], [START, 19, OOV, OOV])  # id 20 >= vocabulary
    assert len(ds.x_train) == 6 and ds.y_train.dtype == np.float32

    numpy_pickle = zipfile.ZipFile(tmp_path / "imdb.npz").read("x_train.npy")
    assert b"_reconstruct" in numpy_pickle  # really a pickle inside
    protocol2 = object_npy(pickle.dumps(x_test, protocol=2), 2)
    assert b"_codecs" in protocol2  # protocol 2 spells bytes as a _codecs.encode call
    write_npy_member(tmp_path, {"x_train": object_npy(PY2_PICKLE, 2), "y_train": plain_npy(np.array([0, 1])),
                                "x_test": protocol2, "y_test": plain_npy(np.array([1, 0]))})
    ds = data.load_real(imdb_spec(), tmp_path)
    assert sorted(map(tuple, ds.x_train[:, -3:].tolist())) == [(START, 4, 5), (START, 7, OOV)]
    assert sorted(map(tuple, ds.x_test[:, -3:].tolist())) == [(0, START, 6), (START, 12, 11)]


class RunsCode:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def evil_npz(folder: Path, marker: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    labels = plain_npy(np.array([0]))
    return write_npy_member(folder, {"x_train": object_npy(pickle.dumps(RunsCode(marker), protocol=2), 1),
                                     "y_train": labels, "x_test": labels, "y_test": labels})


def test_a_pickle_that_would_run_code_is_refused_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil_npz(tmp_path, marker)
    with pytest.raises(UserError, match=r"x_train refused: it refers to (posix|os)\.system, and only numpy's "
                                        r"object-array reconstruction is allowed \(nothing was run\)") as err:
        data.load_real(imdb_spec(), tmp_path)
    assert "\n" not in str(err.value) and not marker.exists()
    # whitelisted names used another way: _codecs.encode as the array, a list of strings, a bad opcode
    good = pickle.dumps(reviews([1, 2]), protocol=2)
    bad = {"numpy._core.multiarray._reconstruct called with arguments an object array of lists never needs":
           good.replace(b"numpy\nndarray", b"_codecs\nencode"),
           "a list holds something other than integers": pickle.dumps(reviews(["rm", "-rf"]), protocol=2),
           "is not one an object array of lists uses": pickle.dumps(reviews([1.5]), protocol=2),
           "the pickle is truncated": good[:-10]}
    for says, payload in bad.items():
        write_npy_member(tmp_path, {"x_train": object_npy(payload, 1), "y_train": plain_npy(np.array([0])),
                                    "x_test": plain_npy(np.array([[1]])), "y_test": plain_npy(np.array([0]))})
        with pytest.raises(UserError, match=re.escape(says)):
            data.load_real(imdb_spec(), tmp_path)


@pytest.mark.slow
def test_a_pickle_that_would_run_code_through_the_cli_is_exit_2(tmp_path: Path, capsys, detected_once) -> None:
    marker = tmp_path / "ran"
    evil_npz(tmp_path / "imdb", marker)
    code = main(["run", "--processes", "1", "-w", "imdb_lstm", "-b", "torch", "--data", "real",
                 "--data-dir", str(tmp_path), "--epochs", "1", "--steps", "1", "--batch-size", "2",
                 "--train-samples", "2", "--eval-samples", "1", "--no-progress", "-o", str(tmp_path / "r.jsonl")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "refers to" in err and "Traceback" not in err, err
    assert not marker.exists()


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
