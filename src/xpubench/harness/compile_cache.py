"""Compilation caches, so that ``compile_s`` means a cold compile in every framework.

PyTorch's Inductor keeps an FX-graph and autograd cache (on by default) and Triton its kernels, in
``$TMPDIR/torchinductor_<user>`` unless ``TORCHINDUCTOR_CACHE_DIR`` / ``TRITON_CACHE_DIR`` say otherwise:
the second worker process of a case (and every later run) would find the first one's graphs there and
time a cache hit, while JAX compiles from scratch in every process (its persistent cache is off unless
``JAX_COMPILATION_CACHE_DIR`` / ``jax_compilation_cache_dir`` is set). So every worker points torch's
caches at an empty folder inside its own private scratch folder (removed with it), unless the user
chose a cache; a compile time that may include cache hits says so in the case's warning.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from xpubench import envnames

TORCH_CACHES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
JAX_CACHE = "JAX_COMPILATION_CACHE_DIR"


def use_fresh_caches(scratch: Path, environ: MutableMapping[str, str]) -> None:
    """Before any framework is imported: torch's compilation caches in ``scratch`` (a folder this worker
    owns), unless the user set them; ``scratch`` is remembered so the cache can be told fresh later."""
    environ[envnames.SCRATCH] = str(scratch)
    for name in TORCH_CACHES:
        environ.setdefault(name, str(scratch / "compile-cache" / name.split("_")[0].lower()))


def warm_cache_note(framework: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Why this process's compile time may include cache hits (None when its caches started empty)."""
    env = os.environ if environ is None else environ
    if framework == "torch":
        scratch = env.get(envnames.SCRATCH)
        used = [f"{name}={env[name]}" for name in TORCH_CACHES
                if env.get(name) and not (scratch and env[name].startswith(scratch))]
        if scratch and not used:
            return None
        where = ", ".join(used) or "Inductor's default cache in the temporary folder"
        return f"compile_s may include Inductor/Triton cache hits (a cache kept between processes: {where})"
    if framework == "jax":
        folder = env.get(JAX_CACHE) or _jax_cache_dir()
        return (f"compile_s may include hits of JAX's persistent compilation cache ({folder})" if folder else None)
    return None


def _jax_cache_dir() -> str | None:
    import sys

    jax = sys.modules.get("jax")
    return getattr(jax.config, "jax_compilation_cache_dir", None) if jax is not None else None
