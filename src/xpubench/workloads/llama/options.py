"""llama's own options (``LlamaOptions``, the workload's ``Options``) and the plan's one reading of a
``--weights`` checkpoint (``pin_options``): its absolute folder, digest, model name and architecture,
pinned in the case's options so the worker makes its spec without opening the checkpoint again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xpubench.case import Options
from xpubench.errors import UserError
from xpubench.workloads.llama import costs
from xpubench.workloads.llama.config import to_hf_config

DEFAULT_PRESET = "smollm-135m"
# --decode: PyTorch's decode step (backends/torch_/generate.py), the default first; torch's record reads them
# (its decode_steps: a case's label names a step other than the default)
DECODE_STEPS = ("compiled", "eager")


@dataclass(frozen=True, eq=False, kw_only=True)
class LlamaOptions(Options):
    """llama's own options (``Workload.Options``; module docstring). None: the preset's (sizes), the
    model's (``context``, ``generation_lengths``). ``depth`` and ``decode`` are lists until
    ``case_options`` splits them, one case per value. ``weights_path``, ``weights_sha256``,
    ``weights_id`` and ``weights_config`` (the checkpoint's config.json) are pinned by the plan
    (``pin_options``): a case's spec is made from them without opening the checkpoint."""

    preset: str = DEFAULT_PRESET
    n_layers: int | None = None
    hidden_size: int | None = None
    n_heads: int | None = None
    n_kv_heads: int | None = None
    head_dim: int | None = None
    intermediate_size: int | None = None
    vocab_size: int | None = None
    weights: str | None = None
    weights_path: str | None = None
    weights_sha256: str | None = None
    weights_id: str | None = None
    weights_config: dict | None = None
    context: int | None = None
    prompt_len: int | None = None
    new_tokens: int | None = None
    depth: int | list = 0
    decode: str | list = DECODE_STEPS[0]
    int4_group_size: int = costs.DEFAULT_INT4_GROUP

    def unresolved(self) -> str | None:
        if self.weights is not None and not (self.weights_path and self.weights_sha256):
            return "with --weights not pinned (no weights_path and weights_sha256)"
        swept = [k for k in ("depth", "decode") if isinstance(getattr(self, k), (list, tuple))]
        return f"with a list of {swept[0]} (one case per value)" if swept else None


_OPENED: dict[tuple[str, tuple], Any] = {}   # (resolved folder, its files' stamp) -> the Checkpoint read


def _stamp(root: Path) -> tuple | None:
    """Name, size and mtime of a checkpoint's JSON and safetensors files: a reading is reused only while
    they hold (None: the folder can't be listed; open_checkpoint says why)."""
    try:
        files = sorted(p for p in root.iterdir() if p.suffix in (".json", ".safetensors"))
        return tuple((p.name, (st := p.stat()).st_size, st.st_mtime_ns) for p in files)
    except OSError:
        return None


def _checkpoint(path: str, sha256: str | None = None) -> Any:
    """The checked checkpoint (checkpoint.open_checkpoint: UserError of one line for a bad directory, or one
    whose digest is not the ``sha256`` the plan pinned). Its headers are read once per process while its
    files are unchanged: the plan's validation, its pin (``pin_options``) and its estimates share one
    reading; a worker's spec opens nothing (the pinned ``weights_config``) and its model builder or GGUF writer
    (``checkpoint_of``) one, for the tensors."""
    from xpubench.workloads.llama.checkpoint import check_pinned, open_checkpoint

    root = Path(path).expanduser().resolve()
    stamp = _stamp(root)
    ckpt = _OPENED.get((str(root), stamp)) if stamp is not None else None
    if ckpt is None:
        ckpt = open_checkpoint(path, sha256)
        if stamp is not None:
            _OPENED[(str(root), stamp)] = ckpt
    check_pinned(root, sha256, ckpt.sha256)
    return ckpt


_checkpoint.cache_clear = _OPENED.clear   # forget what this process read (as a fresh worker process has)


def pin_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options with their ``--weights`` checkpoint pinned (the planner's one reading of it):
    ``weights_path``, the folder's absolute path (so ``--resume`` works from any folder),
    ``weights_sha256``, the digest of its config.json, shard index and safetensors headers
    (checkpoint.digest: the worker and ``--resume`` refuse a changed checkpoint), ``weights_id``, the
    model's name and the digest's first 12 hex digits (the case's key names what is measured, not where
    it lay), and ``weights_config``, its architecture (config.json as this xpubench reads it): the
    worker makes the spec from it without opening the checkpoint. ``weights`` stays as typed (for
    messages). A record pinned before ``weights_id`` is named from what it holds (nothing is read)."""
    weights = options.get("weights")
    if not weights or "weights_sha256" in options:
        pinned = options.get("weights_path"), options.get("weights_sha256")
        return dict(options) if "weights_id" in options or not all(pinned) else \
            {**options, "weights_id": weights_id(*pinned)}
    if not isinstance(weights, str) or not weights.strip():
        raise UserError(f"--weights must be a checkpoint directory, got {weights!r}")
    ckpt = _checkpoint(weights)   # the checkpoint as it is now (read again if its files changed)
    root = str(Path(ckpt.path).expanduser().resolve())
    return {**options, "weights_path": root, "weights_sha256": ckpt.sha256, "weights_id": weights_id(root, ckpt.sha256),
            "weights_config": to_hf_config(ckpt.config)}


def weights_id(root: str, sha256: str) -> str:
    """A checkpoint's part of a case's key: its model's name (the folder's; in a Hugging Face cache,
    ``models--ORG--NAME/snapshots/COMMIT``, NAME) and the first 12 hex digits of its digest."""
    folder = Path(root)
    name = folder.name
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        name = folder.parent.parent.name.split("--")[-1]
    return f"{name}@{sha256[:12]}"
