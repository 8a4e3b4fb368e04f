"""Movie-review sentiment (binary): the aclImdb text folders, a pickle-free imdb.npz, or sentence polarity.

Which format is read, first found wins, looking in ``DIR/imdb/`` then ``DIR``:
1. ``aclImdb/{train,test}/{pos,neg}/*.txt`` (or DIR is the aclImdb folder itself);
2. ``aclImdb_v1.tar.gz``: extracted safely (train/test pos/neg reviews only), then read as 1.;
3. ``imdb.npz`` with plain integer arrays x_train (N, L), y_train (N,), x_test, y_test. The Keras
   ``imdb.npz`` stores its reviews as pickled Python lists: xpubench never unpickles (loading a
   pickle can run arbitrary code), so that file is refused with a message pointing to aclImdb;
4. ``rt-polarity.pos`` / ``rt-polarity.neg`` (also in ``DIR/rt-polarity/``): the sentence polarity
   dataset v1.0, one sentence a line; shuffled with a fixed seed and split 80/20 into train/test.
With download allowed and none found, aclImdb_v1.tar.gz is downloaded into ``DIR/imdb/``.

Text becomes ids the Keras way: 0 pad, 1 start, 2 out-of-vocabulary, 3.. the training split's most
frequent words (ties by word), ``vocab_size - 3`` of them; a review is [1, ids...], padded with 0 at
the front and cut to its last T ids (Keras pad_sequences defaults), T = spec.input_shape[0].
"""

from __future__ import annotations

import re
import zipfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xpubench.data import download as dl
from xpubench.data.archive import safe_extract
from xpubench.data.core import Dataset, candidate_dirs, check_options, find_one, seq_len, split_point
from xpubench.errors import UserError

if TYPE_CHECKING:
    from xpubench.workloads.base import WorkloadSpec

PAD, START, OOV, FIRST_WORD = 0, 1, 2, 3
DEFAULT_VOCAB = 15000
SHUFFLE_SEED = 0
POLARITY_TEST_FRACTION = 0.2
ACL_ARCHIVE = "aclImdb_v1.tar.gz"
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


def tokenize(text: str) -> list[str]:
    """Lower-case words (letters and digits, inner apostrophes kept); HTML line breaks are spaces."""
    return _WORD.findall(text.replace("<br />", " ").lower())


def build_vocab(docs: Sequence[list[str]], vocab_size: int) -> dict[str, int]:
    """word -> id for the ``vocab_size - 3`` most frequent words (ties broken alphabetically)."""
    counts = Counter(w for doc in docs for w in doc)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[: max(vocab_size - FIRST_WORD, 0)]
    return {w: FIRST_WORD + i for i, (w, _) in enumerate(ranked)}


def encode(docs: Sequence[list[str]], vocab: dict[str, int], length: int) -> np.ndarray:
    """int32 (N, length): [START, ids...] pre-padded with PAD, keeping the last ``length`` ids."""
    out = np.zeros((len(docs), length), dtype=np.int32)
    for i, doc in enumerate(docs):
        ids = [START, *(vocab.get(w, OOV) for w in doc)][-length:]
        out[i, length - len(ids):] = ids
    return out


def _vectorize(train: list[tuple[str, float]], test: list[tuple[str, float]], spec: WorkloadSpec,
               source: str, train_cap: int | None = None) -> Dataset:
    """Vocabulary from the whole training split, then the first ``train_cap`` training samples encoded."""
    length = seq_len(spec, "imdb")
    tr_docs = [tokenize(t) for t, _ in train]
    vocab = build_vocab(tr_docs, spec.vocab_size or DEFAULT_VOCAB)
    if train_cap is not None:
        train, tr_docs = train[:train_cap], tr_docs[:train_cap]
    te_docs = [tokenize(t) for t, _ in test]
    y_tr = np.array([y for _, y in train], dtype=np.float32)
    y_te = np.array([y for _, y in test], dtype=np.float32)
    return Dataset(encode(tr_docs, vocab, length), y_tr, encode(te_docs, vocab, length), y_te, source)


def _shuffled(items: list[tuple[str, float]]) -> list[tuple[str, float]]:
    order = np.random.default_rng(SHUFFLE_SEED).permutation(len(items))
    return [items[i] for i in order]


def _acl_root(folder: Path) -> Path | None:
    for top in (folder / "aclImdb", folder):
        if all((top / s / c).is_dir() for s in ("train", "test") for c in ("pos", "neg")):
            return top
    return None


def _read_acl_split(top: Path, split: str, limit: int | None) -> list[tuple[str, float]]:
    files = [(p, 1.0) for p in sorted((top / split / "pos").glob("*.txt"))]
    files += [(p, 0.0) for p in sorted((top / split / "neg").glob("*.txt"))]
    if not files:
        raise UserError(f"{top / split} has no pos/*.txt or neg/*.txt reviews; "
                        f"is the aclImdb folder complete?")
    order = np.random.default_rng(SHUFFLE_SEED).permutation(len(files))
    if limit is not None:
        order = order[:limit]
    out = []
    for i in order:
        path, label = files[i]
        try:
            out.append((path.read_bytes().decode("utf-8", errors="replace"), label))
        except OSError as exc:
            raise UserError(f"cannot read {path}: {exc.strerror}") from None
    return out


def load_acl(top: Path, spec: WorkloadSpec, train_samples: int | None, eval_samples: int | None,
             note: str = "") -> Dataset:
    """The aclImdb folder: reviews of each split shuffled with a fixed seed, then capped.

    The vocabulary always comes from the whole training split, whatever the cap.
    """
    train = _read_acl_split(top, "train", None)
    test = _read_acl_split(top, "test", eval_samples)
    n_train = len(train) if train_samples is None else min(train_samples, len(train))
    return _vectorize(train, test, spec, f"imdb aclImdb reviews in {top}{note}: {n_train} train, "
                                         f"{len(test)} test (shuffled, seed {SHUFFLE_SEED})", train_samples)


def load_npz(path: Path, spec: WorkloadSpec) -> Dataset:
    """An imdb.npz of plain integer arrays (never pickled objects), re-padded to T."""
    length = seq_len(spec, "imdb")
    vocab = spec.vocab_size or DEFAULT_VOCAB
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in ("x_train", "y_train", "x_test", "y_test")}
    except KeyError as exc:
        raise UserError(f"{path} lacks array {exc}; expected x_train, y_train, x_test, y_test") from None
    except ValueError as exc:
        if "pickle" in str(exc):
            raise UserError(f"{path} stores Python objects (pickle), which xpubench never loads; put the "
                            f"aclImdb folder or {ACL_ARCHIVE} in {path.parent} instead") from None
        raise UserError(f"{path} is not a valid .npz file ({exc})") from None
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise UserError(f"{path} is not a valid .npz file ({exc}); download it again") from None
    out = []
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.ndim != 2 or not np.issubdtype(x.dtype, np.integer) or y.shape != (len(x),):
            raise UserError(f"{path}: x_{split} must be an integer (N, L) array and y_{split} (N,), "
                            f"got {x.shape} {x.dtype} and {y.shape}")
        if len(x) and (x.min() < 0 or not np.isin(np.unique(y), (0, 1)).all()):
            raise UserError(f"{path}: x_{split} has negative ids or y_{split} labels other than 0/1")
        x = np.where(x >= vocab, OOV, x).astype(np.int32)
        x = x[:, -length:] if x.shape[1] >= length else np.pad(x, ((0, 0), (length - x.shape[1], 0)))
        out += [np.ascontiguousarray(x), y.astype(np.float32)]
    return Dataset(*out, source=f"imdb integer arrays in {path} (ids >= {vocab} -> {OOV})")


def _decode(path: Path) -> list[str]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")    # the published v1.0 files are latin-1; copies may be UTF-8
    return [line.strip() for line in text.splitlines() if line.strip()]


def load_polarity(pos: Path, neg: Path, spec: WorkloadSpec) -> Dataset:
    """Sentence polarity (rt-polarity.pos/.neg): shuffled with a fixed seed, split 80/20."""
    items = [(s, 1.0) for s in _decode(pos)] + [(s, 0.0) for s in _decode(neg)]
    if not items:
        raise UserError(f"{pos} and {neg} hold no sentences")
    items = _shuffled(items)
    cut = split_point(len(items), POLARITY_TEST_FRACTION, "rt-polarity")
    return _vectorize(items[:cut], items[cut:], spec,
                      f"sentence polarity {pos.name}/{neg.name} in {pos.parent}: {len(items)} sentences, "
                      f"shuffled (seed {SHUFFLE_SEED}), first {cut} train, last {len(items) - cut} test")


def _is_review(name: str) -> bool:
    parts = name.split("/")
    return (len(parts) == 4 and parts[0] == "aclImdb" and parts[1] in ("train", "test")
            and parts[2] in ("pos", "neg") and parts[3].endswith(".txt"))


def load_imdb(spec: WorkloadSpec, root: Path, *, download: bool, train_samples: int | None = None,
              eval_samples: int | None = None, **options: Any) -> Dataset:
    """Binary sentiment data from whichever supported format is in ``root`` (see the module docstring)."""
    check_options(options, (), "imdb")
    folders = candidate_dirs(root, ("imdb",))
    for folder in folders:
        top = _acl_root(folder)
        if top is not None:
            return load_acl(top, spec, train_samples, eval_samples)
    for folder in folders:
        archive = find_one(folder, (ACL_ARCHIVE,))
        if archive is not None:
            return _from_archive(archive, spec, train_samples, eval_samples)
    for folder in folders:
        npz = find_one(folder, ("imdb.npz",))
        if npz is not None:
            return load_npz(npz, spec).head(train_samples, eval_samples)
    for folder in [*folders, root / "rt-polarity"]:
        pos, neg = folder / "rt-polarity.pos", folder / "rt-polarity.neg"
        if pos.is_file() and neg.is_file():
            return load_polarity(pos, neg, spec).head(train_samples, eval_samples)
    if not download:
        raise UserError(f"no imdb data in {root}: put the aclImdb folder, {ACL_ARCHIVE}, or "
                        f"rt-polarity.pos/.neg there, or allow downloading")
    archive = dl.download_published("imdb", [ACL_ARCHIVE], root / "imdb")[0]
    return _from_archive(archive, spec, train_samples, eval_samples)


def _from_archive(archive: Path, spec: WorkloadSpec, train_samples: int | None,
                  eval_samples: int | None) -> Dataset:
    status = dl.verify(archive, "imdb")
    safe_extract(archive, archive.parent, keep=_is_review)
    top = _acl_root(archive.parent)
    if top is None:
        raise UserError(f"{archive} holds no aclImdb/{{train,test}}/{{pos,neg}} reviews; is it aclImdb_v1?")
    return load_acl(top, spec, train_samples, eval_samples, note=f" (from {archive.name}, {status})")
