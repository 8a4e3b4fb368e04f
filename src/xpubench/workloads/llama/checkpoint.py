"""Local Hugging Face Llama checkpoints: a directory with ``config.json`` and the weights in
``*.safetensors`` (one file, or shards listed by ``model.safetensors.index.json``). Nothing is
downloaded; the architecture comes from config.json (``config.from_hf_config``).

``open_checkpoint(dir)`` checks everything it can from the files' headers before any weight is read:
every tensor a ``LlamaForCausalLM`` of that config has (hf_tensors.py) is present once, with its shape
and a float dtype (F32, F16, BF16), and nothing else is (``lm_head.weight`` of a tied model and the
``rotary_emb.inv_freq`` buffers old exports carry are ignored). A missing, corrupt or mismatched file
is a UserError of one line. Then ``Checkpoint.tensors(framework)`` reads them one at a time (safetensors
``safe_open``; "pt" for torch, "flax" for JAX, which keep bfloat16).

Hostile folders: config.json, the shard index and each safetensors header are read through readfile.py
before anything else touches them (regular files only: a FIFO is never waited on, a link to /dev/zero
never read; at most CONFIG_LIMIT, INDEX_LIMIT and HEADER_LIMIT bytes; strict JSON), config.json's
values are checked (config.HF_CONFIG) before the list of tensors is built from them, and the index may
name only files inside the folder. Links to regular files are followed (the Hugging Face cache links
each file to a blob). ``Checkpoint.sha256`` (``digest``) fingerprints config.json, the index and the
headers: the plan pins it (plan/usermodel.py ``pin_checkpoint``) and ``open_checkpoint(path, sha256)``
refuses a checkpoint that changed since.

``write_checkpoint`` writes such a directory (tests, benchmarks): numpy tensors, optionally sharded.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xpubench import readfile
from xpubench.errors import UserError
from xpubench.legible.plaintext import one_line
from xpubench.results.validate import TEXT, Invalid, map_of, record
from xpubench.workloads.llama.config import LlamaConfig, from_hf_config, to_hf_config
from xpubench.workloads.llama.hf_tensors import hf_tensor_shapes

INDEX = "model.safetensors.index.json"
FLOAT_DTYPES = ("F32", "F16", "BF16")
# the most xpubench reads of each file before anything else: real ones are far smaller (a config.json
# 1-2 KB; Llama 3.1 405B's index 100 KB and its headers ~150 bytes a tensor)
CONFIG_LIMIT = readfile.MiB
INDEX_LIMIT = 8 * readfile.MiB
HEADER_LIMIT = 8 * readfile.MiB
SHARD_INDEX = record({"weight_map": map_of(TEXT)}, rest=lambda value, at: None)
IGNORED = re.compile(r"(^|\.)rotary_emb\.inv_freq$")


@dataclass(frozen=True)
class Checkpoint:
    """A checked checkpoint directory: its config and which file holds each tensor it will read."""

    path: Path
    config: LlamaConfig
    files: dict[str, Path]           # tensor name -> file, only the tensors the model takes
    dtypes: tuple[str, ...]          # stored dtypes found (e.g. ("BF16",))
    sha256: str                      # of config.json, the index and the safetensors headers (``digest``)

    def tensors(self, framework: str) -> Iterator[tuple[str, Any]]:
        """(name, tensor) for every tensor the model takes, file by file; framework "pt" or "flax"."""
        from safetensors import SafetensorError, safe_open

        by_file: dict[Path, list[str]] = {}
        for name, file in self.files.items():
            by_file.setdefault(file, []).append(name)
        for file, names in by_file.items():
            try:
                with safe_open(str(file), framework=framework) as f:
                    for name in names:
                        yield name, f.get_tensor(name)
            except (SafetensorError, OSError) as exc:
                raise UserError(f"--weights {self.path}: cannot read {file.name}: {exc}") from None


def _read_json(root: Path, name: str, what: str, limit: int) -> Any:
    """A JSON file of the checkpoint read as every file a user hands over is (readfile.py: a regular file
    only, so a FIFO or a link to /dev/zero is refused before a byte is read; at most ``limit`` bytes;
    strict JSON). Returns (the parsed value, its bytes, for the digest)."""
    path = root / name
    if not path.exists():
        raise UserError(f"--weights {root}: no {name} ({what})")
    data = readfile.read_bytes(path, "--weights", limit)
    return readfile.loads_json(data, f"--weights {root}: {name}"), data


def _shard_name(root: Path, tensor: str, file: str) -> str:
    """A shard file named by the index: a file name in the checkpoint folder, nothing else (a ``../``,
    an absolute path or a subfolder would read a file outside what ``--weights`` names)."""
    if file in ("", ".", "..") or Path(file).name != file or "\\" in file or "\0" in file:
        raise UserError(f"--weights {root}: {INDEX} puts {tensor} in {file[:80]!r}: a shard must be a file "
                        "name inside the checkpoint folder (no folder, '..' or absolute path)")
    return file


def _weight_files(root: Path) -> tuple[list[Path], dict[str, str] | None, bytes]:
    """The safetensors files to read, for a sharded checkpoint the index's tensor -> file map, and the
    index's bytes (b"" without one)."""
    index_path = root / INDEX
    if index_path.exists():
        index, data = _read_json(root, INDEX, "the shard index", INDEX_LIMIT)
        try:
            SHARD_INDEX(index, "index")
        except Invalid as exc:
            raise UserError(f"--weights {root}: {INDEX}: {str(exc).removeprefix('index.')}") from None
        weight_map = index.get("weight_map")
        if not weight_map:
            raise UserError(f"--weights {root}: {INDEX} has no weight_map")
        files = sorted({root / _shard_name(root, t, f) for t, f in weight_map.items()})
        missing = [f.name for f in files if not f.exists()]
        if missing:
            raise UserError(f"--weights {root}: {INDEX} lists {', '.join(map(one_line, missing[:3]))}, which is not "
                            "in the directory")
        return files, weight_map, data
    files = sorted(root.glob("*.safetensors"))
    if not files:
        extra = " (pytorch_model.bin is not read: save the model with safe_serialization)" \
            if any(root.glob("*.bin")) else ""
        raise UserError(f"--weights {root}: no *.safetensors files{extra}")
    return files, None, b""


def _header_bytes(root: Path, file: Path) -> bytes:
    """A safetensors file's 8-byte header length and JSON header, read from a regular file (readfile:
    never a FIFO's wait or a device's endless bytes) and bounded by HEADER_LIMIT."""
    bad = f"--weights {root}: {file.name} is not a readable safetensors file"
    with readfile.open_regular(file, "--weights") as fh:
        try:
            head = fh.read(8)
            size = int.from_bytes(head, "little")
            if len(head) < 8 or size < 2:
                raise UserError(f"{bad} (shorter than its header)")
            if size > HEADER_LIMIT:
                raise UserError(f"{bad} (its header claims {size:,} bytes; xpubench reads at most "
                                f"{HEADER_LIMIT // readfile.MiB} MiB)")
            data = fh.read(size)
        except OSError as exc:
            raise UserError(f"{bad} ({exc.strerror or exc})") from None
    if len(data) < size:
        raise UserError(f"{bad} (its header is cut short)")
    return head + data


def _headers(root: Path, files: list[Path]) -> tuple[dict[str, tuple[Path, tuple[int, ...], str]], list[bytes]]:
    """tensor name -> (file, shape, dtype), from each file's header (a tensor in two files is an error),
    and the headers' bytes (for the digest)."""
    from safetensors import SafetensorError, safe_open

    found: dict[str, tuple[Path, tuple[int, ...], str]] = {}
    raw = []
    for file in files:
        raw.append(_header_bytes(root, file))
        try:
            with safe_open(str(file), framework="numpy") as f:
                for name in f.keys():  # noqa: SIM118 (a safe_open handle is not iterable)
                    sl = f.get_slice(name)
                    if name in found:
                        raise UserError(f"--weights {root}: tensor {one_line(name)} is in both {found[name][0].name} "
                                        f"and {file.name}")
                    found[name] = (file, tuple(sl.get_shape()), sl.get_dtype())
        except (SafetensorError, OSError) as exc:
            raise UserError(f"--weights {root}: {file.name} is not a readable safetensors file ({exc})") from None
    return found, raw


def digest(config: bytes, index: bytes, headers: list[tuple[str, bytes]]) -> str:
    """sha256 of what defines a checkpoint short of its tensor values: config.json, the shard index and
    every safetensors header (names, dtypes, shapes, offsets, metadata), each with its name and length."""
    h = hashlib.sha256()
    for name, data in (("config.json", config), (INDEX, index), *headers):
        h.update(name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def check_pinned(root: Path, sha256: str | None, now: str) -> None:
    """UserError when the digest the plan pinned (``sha256``) is not the checkpoint's (``now``)."""
    if sha256 and now != sha256:
        raise UserError(f"--weights {root} changed since the run was planned (config.json and safetensors headers: "
                        f"sha256 {sha256[:12]} then, {now[:12]} now); put the planned version back, or start a "
                        "new run")


def open_checkpoint(path: str | Path, sha256: str | None = None) -> Checkpoint:
    """Check a checkpoint directory (module docstring) and return what reading it needs; with ``sha256``
    (the digest the plan recorded), a checkpoint whose digest differs is refused."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise UserError(f"--weights {path}: not a directory (expected config.json and *.safetensors)")
    config, config_bytes = _read_json(root, "config.json", "the model's architecture", CONFIG_LIMIT)
    cfg = from_hf_config(config, name=root.name, where=f"--weights {root}: config.json")
    files, weight_map, index_bytes = _weight_files(root)
    found, raw = _headers(root, files)
    now = digest(config_bytes, index_bytes, [(f.name, data) for f, data in zip(files, raw)])
    check_pinned(root, sha256, now)
    if weight_map is not None:
        for name, file in weight_map.items():
            if name in found and found[name][0].name != file:
                raise UserError(f"--weights {root}: {INDEX} puts {one_line(name)} in {one_line(file)}, but it is in "
                                f"{one_line(found[name][0].name)}")
            if name not in found:
                raise UserError(f"--weights {root}: {INDEX} lists {one_line(name)} in {one_line(file)}, which does not "
                                "hold it")
    expected = hf_tensor_shapes(cfg)
    ignored = {n for n in found if IGNORED.search(n) or (cfg.tie_embeddings and n == "lm_head.weight")}
    missing = [n for n in expected if n not in found]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise UserError(f"--weights {root}: lacks {', '.join(missing[:3])}{more} (config.json: "
                        f"{cfg.n_layers} layers, tie_word_embeddings {str(cfg.tie_embeddings).lower()})")
    unexpected = sorted(set(found) - set(expected) - ignored)
    if unexpected:
        raise UserError(f"--weights {root}: {one_line(unexpected[0])} is not a weight of LlamaForCausalLM with this "
                        f"config.json ({len(unexpected)} such tensors)")
    for name, shape in expected.items():
        file, got, dtype = found[name]
        if got != shape:
            raise UserError(f"--weights {root}: {name} in {file.name} has shape {list(got)}, config.json "
                            f"implies {list(shape)}")
        if dtype not in FLOAT_DTYPES:
            raise UserError(f"--weights {root}: {name} is {dtype}; only {', '.join(FLOAT_DTYPES)} are read")
    return Checkpoint(root, cfg, {n: found[n][0] for n in expected},
                      tuple(sorted({found[n][2] for n in expected})), now)


# ---- writing (tests, benchmarks) ------------------------------------------------------------------

def random_hf_tensors(cfg: LlamaConfig, seed: int = 0, std: float = 0.02) -> dict[str, np.ndarray]:
    """A LlamaForCausalLM's tensors with random values (float32): N(0, std) matrices, RMSNorm weights
    1 + N(0, std) (not all ones, so a norm applied to the wrong tensor shows)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in hf_tensor_shapes(cfg).items():
        base = 1.0 if len(shape) == 1 else 0.0
        out[name] = (base + rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float32)
    return out


def write_checkpoint(path: str | Path, cfg: LlamaConfig, tensors: dict[str, np.ndarray],
                     shards: int = 1) -> Path:
    """Write config.json and the tensors as ``model.safetensors``, or as ``shards`` files
    ``model-0000k-of-0000n.safetensors`` with ``model.safetensors.index.json``."""
    from safetensors.numpy import save_file

    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(to_hf_config(cfg), indent=2))
    names = list(tensors)
    if shards == 1:
        save_file({n: np.ascontiguousarray(tensors[n]) for n in names}, str(root / "model.safetensors"),
                  metadata={"format": "pt"})
        return root
    weight_map = {}
    for k in range(shards):
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = names[k::shards]
        save_file({n: np.ascontiguousarray(tensors[n]) for n in part}, str(root / file), metadata={"format": "pt"})
        weight_map.update({n: file for n in part})
    total = sum(int(t.nbytes) for t in tensors.values())
    (root / INDEX).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    return root
