"""torch's compilation caches, so that ``compile_s`` means a cold compile (as JAX's is: backends/jax_).

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


def use_fresh_caches(scratch: Path, environ: MutableMapping[str, str]) -> None:
    """Before any framework is imported: torch's compilation caches in ``scratch`` (the folder this worker
    owns, also in ``environ[envnames.SCRATCH]``, so the cache can be told fresh later), unless the user set
    them."""
    for name in TORCH_CACHES:
        environ.setdefault(name, str(scratch / "compile-cache" / name.split("_")[0].lower()))


def warm_cache_note(environ: Mapping[str, str] | None = None) -> str | None:
    """Why this process's compile time may include cache hits (None when its caches started empty)."""
    env = os.environ if environ is None else environ
    scratch = env.get(envnames.SCRATCH)
    used = [f"{name}={env[name]}" for name in TORCH_CACHES
            if env.get(name) and not (scratch and env[name].startswith(scratch))]
    if scratch and not used:
        return None
    where = ", ".join(used) or "Inductor's default cache in the temporary folder"
    return f"compile_s may include Inductor/Triton cache hits (a cache kept between processes: {where})"
