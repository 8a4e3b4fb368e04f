"""Byte-level text corpus for next-character models.

``DIR`` may be a text file, or a folder: ``DIR/text/``, ``DIR/tinyshakespeare/`` and ``DIR`` are
searched for ``input.txt``, else for ``*.txt`` files (several are joined in name order). With download
allowed and none found, tiny-shakespeare's ``input.txt`` is downloaded into ``DIR/text/``.

The bytes are cut into non-overlapping windows of T + 1 bytes (T = spec.input_shape[0]); x is the
first T bytes of a window and y the next T (the same window shifted by one), both int32. The first
90% of the windows train, the last 10% test (the corpus order is kept: no leakage between them).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xpubench.data import download as dl
from xpubench.data.core import Dataset, candidate_dirs, check_options, seq_len, split_point
from xpubench.errors import UserError

if TYPE_CHECKING:
    from xpubench.workloads.base import WorkloadSpec

TEST_FRACTION = 0.1
CORPUS = "input.txt"


def _corpus_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    for folder in candidate_dirs(root, ("text", "tinyshakespeare")):
        if (folder / CORPUS).is_file():
            return [folder / CORPUS]
        files = sorted(p for p in folder.glob("*.txt") if p.is_file())
        if files:
            return files
    return []


def windows(data: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Non-overlapping (x, y) windows: x = bytes [i, i+T), y = bytes [i+1, i+T+1), as int32."""
    n = len(data) // (length + 1)
    blocks = data[: n * (length + 1)].reshape(n, length + 1).astype(np.int32)
    return np.ascontiguousarray(blocks[:, :-1]), np.ascontiguousarray(blocks[:, 1:])


def load_text(spec: WorkloadSpec, root: Path, *, download: bool, train_samples: int | None = None,
              eval_samples: int | None = None, **options: Any) -> Dataset:
    """Windows of a byte corpus: x int32 (N, T) and next-byte targets y int32 (N, T)."""
    check_options(options, (), "text")
    length = seq_len(spec, "text")
    files = _corpus_files(root)
    if not files:
        if not download:
            raise UserError(f"no text corpus in {root}: put a .txt file (e.g. tinyshakespeare {CORPUS}) "
                            f"there or pass the file as --data-dir, or add --download when online")
        files = dl.download_published("text", [CORPUS], root / "text")
    notes = []
    parts = []
    for path in files:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise UserError(f"cannot read {path}: {exc.strerror}") from None
        parts.append(raw)
        notes.append(f"{path.name} ({dl.verify(path, 'text', raw) if path.name == CORPUS else 'unverified'})")
    data = np.frombuffer(b"".join(parts), dtype=np.uint8)
    vocab = spec.vocab_size or spec.num_outputs
    if data.size and int(data.max()) >= vocab:
        raise UserError(f"{files[0].parent}: the corpus has byte value {int(data.max())}, but workload "
                        f"{spec.name} has a vocabulary of {vocab}")
    x, y = windows(data, length)
    if len(x) < 2:
        raise UserError(f"{', '.join(map(str, files))}: {data.size} bytes are too few for two windows of "
                        f"{length + 1} bytes; use a longer text")
    cut = split_point(len(x), TEST_FRACTION, "text corpus")
    source = (f"byte corpus {', '.join(notes)} in {files[0].parent}: {data.size} bytes, {len(x)} windows of "
              f"{length}+1, first {cut} train, last {len(x) - cut} test")
    return Dataset(x[:cut], y[:cut], x[cut:], y[cut:], source).head(train_samples, eval_samples)
