"""The llama model as a Hugging Face checkpoint folder, what an engine loads (the workload's ``checkpoint``
hook; backends/engine.py): the ``--weights`` folder as the plan pinned it, else a preset's random weights
(``checkpoint.random_hf_tensors`` from the case's seed) written once as ``config.json`` +
``model.safetensors`` under ``<cache>/checkpoints/`` and reused by every engine and case after.

``Weights.digest`` is what an engine keys its converted files by: for a checkpoint, the digest the plan
pinned (config.json, index and safetensors headers) with the files' names, sizes and modification times
(new values under the same headers are a new model); for random weights, the architecture, the seed and
``WRITER_VERSION``."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from xpubench.envnames import cache_folder
from xpubench.workloads.base import Weights
from xpubench.workloads.llama.checkpoint import random_hf_tensors, write_checkpoint
from xpubench.workloads.llama.config import to_hf_config

WRITER_VERSION = 1   # bump when what is written changes: older folders are then not reused


def _digest(identity: dict) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def weights_of(spec, seed: int, write: bool = True, environ=os.environ) -> Weights:
    """The spec's weights as a checkpoint folder (module docstring); the random folder is written unless
    the cache has it or ``write`` is false (the plan's checks read the rest: nothing is written then). A
    folder half written by a process that died is never taken: it is renamed into place whole."""
    config = to_hf_config(spec.config)
    if spec.weights:
        files = sorted((p.name, (st := p.stat()).st_size, st.st_mtime_ns)
                       for p in Path(spec.weights).iterdir() if p.is_file())
        return Weights(Path(spec.weights), config, _digest({"sha256": spec.weights_sha256, "files": files}),
                       spec.config.name, int4_group=spec.int4_group_size)
    digest = _digest({"writer": WRITER_VERSION, "config": config, "seed": seed})
    folder = cache_folder(environ) / "checkpoints" / f"llama-{digest[:16]}"
    if write and not (folder / "config.json").is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        write_checkpoint(tmp, spec.config, random_hf_tensors(spec.config, seed))
        try:
            tmp.rename(folder)
        except OSError:   # another process put it there first: theirs is the same
            shutil.rmtree(tmp, ignore_errors=True)
    return Weights(folder, config, digest, spec.config.name, seed=seed, int4_group=spec.int4_group_size)
