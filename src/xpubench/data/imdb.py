"""Movie-review sentiment (binary): aclImdb folders, imdb.npz (Keras format without unpickling), rt-polarity.

Which format is read, first found wins, looking in ``DIR/imdb/`` then ``DIR``:
1. ``aclImdb/{train,test}/{pos,neg}/*.txt`` (or DIR is the aclImdb folder itself);
2. ``aclImdb_v1.tar.gz``: extracted safely (train/test pos/neg reviews only), then read as 1.;
3. ``imdb.npz`` with x_train, y_train, x_test, y_test, either
   a. the standard Keras file (keras.datasets.imdb): each review a Python list of word ranks (1 = the
      most frequent word), stored as numpy object arrays, i.e. pickles. They are read WITHOUT unpickling:
      ``read_object_array`` (on the standard library's opcode parser) interprets only the pickle opcodes numpy writes
      for a 1-D object array of lists of ints, admits exactly numpy's array/dtype reconstruction globals
      (as names: it never calls them) and refuses anything else (another global such as os.system, any
      other opcode) with one line, before anything is built. Then as ``keras.datasets.imdb.load_data``:
      each split shuffled (RandomState(113), train then test), ids + 3 after a start id 1, ids >= the
      vocabulary -> 2; or
   b. plain integer arrays x_train (N, L), already in the ids below;
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
from xpubench.data.objarray import MAX_MEMBER_BYTES, Refused, read_object_array
from xpubench.errors import UserError

if TYPE_CHECKING:
    from xpubench.workloads.base import WorkloadSpec

PAD, START, OOV, FIRST_WORD = 0, 1, 2, 3
DEFAULT_VOCAB = 15000
SHUFFLE_SEED = 0
POLARITY_TEST_FRACTION = 0.2
ACL_ARCHIVE = "aclImdb_v1.tar.gz"
NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")
KERAS_SEED, KERAS_INDEX_FROM = 113, 3      # keras.datasets.imdb.load_data defaults
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


def _npz_arrays(path: Path) -> dict[str, object]:
    """x_train, y_train, x_test, y_test from an .npz: plain arrays as numpy reads them (never pickles),
    object arrays through read_object_array."""
    out: dict[str, object] = {}
    try:
        with zipfile.ZipFile(path) as npz:
            names = set(npz.namelist())
            for key in NPZ_KEYS:
                member = f"{key}.npy"
                if member not in names:
                    raise UserError(f"{path} lacks array '{key}'; expected x_train, y_train, x_test, y_test")
                with npz.open(member) as fp:
                    version = np.lib.format.read_magic(fp)
                    if version == (1, 0):
                        shape, _, dtype = np.lib.format.read_array_header_1_0(fp)
                    elif version == (2, 0):
                        shape, _, dtype = np.lib.format.read_array_header_2_0(fp)
                    else:
                        raise UserError(f"{path}: {member} is .npy version {version}, not 1.0 or 2.0")
                    if not dtype.hasobject:
                        out[key] = None
                    elif len(shape) != 1 or npz.getinfo(member).file_size > MAX_MEMBER_BYTES:
                        raise UserError(f"{path}: {key} is a {len(shape)}-D object array of "
                                        f"{npz.getinfo(member).file_size} bytes: not a Keras imdb.npz")
                    else:
                        try:
                            out[key] = read_object_array(fp.read())
                        except Refused as exc:
                            raise UserError(f"{path}: {key} refused: {exc}; xpubench never unpickles "
                                            f"downloaded data") from None
                        if len(out[key]) != shape[0]:
                            raise UserError(f"{path}: {key} holds {len(out[key])} items, its header says "
                                            f"{shape[0]}")
                if out[key] is None:
                    with npz.open(member) as fp:
                        out[key] = np.lib.format.read_array(fp, allow_pickle=False)
    except (OSError, zipfile.BadZipFile, EOFError, ValueError) as exc:
        raise UserError(f"{path} is not a valid .npz file ({exc}); download it again") from None
    return out


def _labels(path: Path, split: str, y, n: int) -> np.ndarray:
    y = np.asarray(y)
    if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer) or not np.isin(y, (0, 1)).all():
        raise UserError(f"{path}: y_{split} must be {n} labels 0/1, got {y.shape} {y.dtype}")
    return y.astype(np.float32)


def _keras_split(path: Path, split: str, seqs: list, y: np.ndarray, rng: np.random.RandomState,
                 vocab: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """keras.datasets.imdb.load_data on one split: shuffled by ``rng``, [1, rank + 3, ...] with ids
    >= vocab -> OOV, then pre-padded / cut to the last ``length`` ids."""
    order = np.arange(len(seqs))
    rng.shuffle(order)
    x = np.zeros((len(seqs), length), dtype=np.int32)
    for row, i in enumerate(order):
        ranks = seqs[i]
        if ranks.size and ranks.min() < 0:
            raise UserError(f"{path}: x_{split} has negative word indices")
        ids = np.where(ranks >= vocab - KERAS_INDEX_FROM, OOV, ranks + KERAS_INDEX_FROM)
        ids = np.concatenate(([START], ids))[-length:]
        x[row, length - len(ids):] = ids
    return x, y[order]


def load_npz(path: Path, spec: WorkloadSpec) -> Dataset:
    """imdb.npz: the Keras word-index file (object arrays, read without unpickling) or plain (N, L)
    integer arrays; both re-padded to T."""
    length = seq_len(spec, "imdb")
    vocab = spec.vocab_size or DEFAULT_VOCAB
    arrays = _npz_arrays(path)
    keras = [isinstance(arrays[f"x_{s}"], list) for s in ("train", "test")]
    if any(keras):
        if not all(keras):
            raise UserError(f"{path}: x_train and x_test must both be lists of word indices (Keras) or both "
                            f"integer (N, L) arrays")
        rng = np.random.RandomState(KERAS_SEED)  # the legacy generator: what Keras shuffles with
        out = []
        for split in ("train", "test"):
            seqs = arrays[f"x_{split}"]
            out += _keras_split(path, split, seqs, _labels(path, split, arrays[f"y_{split}"], len(seqs)), rng,
                                vocab, length)
        return Dataset(*out, source=f"imdb Keras word indices in {path}: {len(out[0])} train, {len(out[2])} "
                                    f"test (shuffled as keras.datasets.imdb.load_data, seed {KERAS_SEED}; "
                                    f"ids = rank + {KERAS_INDEX_FROM}, >= {vocab} -> {OOV})")
    out = []
    for split in ("train", "test"):
        x = arrays[f"x_{split}"]
        if x.ndim != 2 or not np.issubdtype(x.dtype, np.integer):
            raise UserError(f"{path}: x_{split} must be an integer (N, L) array or the Keras lists of word "
                            f"indices, got {x.shape} {x.dtype}")
        y = _labels(path, split, arrays[f"y_{split}"], len(x))
        if len(x) and x.min() < 0:
            raise UserError(f"{path}: x_{split} has negative ids")
        x = np.where(x >= vocab, OOV, x).astype(np.int32)
        x = x[:, -length:] if x.shape[1] >= length else np.pad(x, ((0, 0), (length - x.shape[1], 0)))
        out += [np.ascontiguousarray(x), y]
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
