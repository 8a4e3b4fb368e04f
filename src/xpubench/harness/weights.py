"""Model weights as files, framework-neutral and pickle-free, and the trained-weights cache of
inference cases.

A weights file is a ``.npz`` of plain arrays, one per parameter, named by its path in the model
("lstm.weight_ih_l0" for a torch state_dict, "params/lstm_l0/cell/input/kernel" for a flax variable
tree), plus one ``__meta__`` entry: UTF-8 JSON (framework, workload, dtypes) stored as a uint8 array.
It is read with ``np.load(allow_pickle=False)``: loading a weights file can never run code. bfloat16
(which numpy lacks) is stored as its raw uint16 bits and named in ``__meta__["bf16"]``.

The converters between framework objects and ``{name: array}`` live in the backends
(``backends/torch_/infer.py``, ``backends/jax_/infer.py``); this module never imports a framework.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from xpubench import envnames
from xpubench.errors import UserError

META = "__meta__"
CACHE_ENV = envnames.WEIGHTS_DIR    # folder of the trained-weights cache; "off" disables it
# the fields of a case that decide the trained weights (precision and mode do not: training is fp32)
INFERENCE_OPTIONS = ("weights_dir", "int8_mode")   # options that do not change the training
TRAINING_FIELDS = ("workload", "backend", "device", "batch_size", "devices", "epochs", "steps",
                   "train_samples", "data", "data_dir", "compile", "seed")


def save(path: str | os.PathLike[str], arrays: dict[str, np.ndarray], meta: dict[str, Any] | None = None) -> Path:
    """Write ``arrays`` (name -> numpy array) and ``meta`` to ``path`` atomically; returns the path."""
    path = Path(path)
    meta = dict(meta or {})
    out: dict[str, np.ndarray] = {}
    bf16 = []
    for name, value in arrays.items():
        if name == META:
            raise ValueError(f"{META} is reserved")
        value = np.asarray(value)
        if value.dtype.name == "bfloat16":   # ml_dtypes' bfloat16: keep the bits, not a pickle
            value, _ = value.view(np.uint16), bf16.append(name)
        if value.dtype == object:
            raise ValueError(f"{name}: object arrays cannot be saved without pickle")
        out[name] = value
    meta["bf16"] = bf16
    out[META] = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        np.savez(fh, **out)
    os.replace(tmp, path)
    return path


def load(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(arrays, meta) from a file written by ``save``; a bad file is a one-line UserError."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except FileNotFoundError:
        raise UserError(f"weights file {path} does not exist") from None
    except ValueError as exc:
        raise UserError(f"{path} is not a weights file xpubench can read ({exc})") from None
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise UserError(f"{path} is not a valid .npz weights file ({exc})") from None
    if META not in arrays:
        raise UserError(f"{path} has no {META} entry: not written by xpubench")
    meta = json.loads(arrays.pop(META).tobytes().decode())
    for name in meta.get("bf16", []):
        import ml_dtypes  # installed with jax; only needed for bf16 files

        arrays[name] = arrays[name].view(ml_dtypes.bfloat16)
    return arrays, meta


def digest(arrays: dict[str, np.ndarray]) -> str:
    """sha256 over names, dtypes, shapes and bytes (sorted by name): equal weights, equal digest."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def cache_dir(case) -> Path | None:
    """Where trained weights are kept: options["weights_dir"] (``--save-weights DIR``), else
    $XPUBENCH_WEIGHTS_DIR, else ``<temp>/xpubench-weights``; None when set to "off"."""
    chosen = case.options.get("weights_dir") or os.environ.get(CACHE_ENV)
    if chosen == "off":
        return None
    return Path(chosen).expanduser() if chosen else Path(tempfile.gettempdir()) / "xpubench-weights"


def training_key(case, extra: dict[str, Any]) -> str:
    """Identity of a training run: the case's training fields (not its precision or mode), options
    other than where to save, and ``extra`` (framework version, code and data digests)."""
    fields = {k: v for k, v in dataclasses.asdict(case).items() if k in TRAINING_FIELDS}
    if fields.get("data_dir"):
        fields["data_dir"] = str(Path(fields["data_dir"]).expanduser().resolve())
    fields["options"] = {k: v for k, v in case.options.items() if k not in INFERENCE_OPTIONS}
    blob = json.dumps({**fields, **extra}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def code_digest(*sources) -> str:
    """sha256 of the source files ``sources`` (paths, or modules: their files): a code change invalidates
    cached weights."""
    h = hashlib.sha256()
    for source in sources:
        h.update(Path(getattr(source, "__file__", source)).read_bytes())
    return h.hexdigest()[:16]


def data_digest(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def trained_weights(case, key_extra: dict[str, Any], train: Callable[[], dict[str, np.ndarray]],
                    meta: dict[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The fp32 weights of ``case``'s training run: from the cache when this exact run (same key) was
    trained before, else ``train()`` (then saved). Returns (arrays, info) where info holds
    ``weights_source`` ("trained" | "cache"), ``weights_sha256``, ``weights_file`` and ``train_s``
    (wall seconds of the training, None when loaded)."""
    folder = cache_dir(case)
    key = training_key(case, key_extra)
    path = folder / f"{case.workload}-{case.backend}-s{case.seed}-{key}.npz" if folder else None
    if path is not None and path.is_file():
        try:
            arrays, _ = load(path)
            return arrays, {"weights_source": "cache", "weights_sha256": digest(arrays),
                            "weights_file": str(path), "train_s": None}
        except UserError:
            pass  # a half-written or foreign file: train again and overwrite it
    start = time.perf_counter()
    arrays = train()
    train_s = time.perf_counter() - start
    if path is not None:
        save(path, arrays, {**meta, "key": key, "case": case.key})
    return arrays, {"weights_source": "trained", "weights_sha256": digest(arrays),
                    "weights_file": str(path) if path else None, "train_s": train_s}
