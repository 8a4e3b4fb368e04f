"""Where llama.cpp's programs are and how they were built.

The programs (``llama-bench``, ``llama-quantize``; ``llama-server`` is built beside them) are looked up
in this order, the first folder holding ``llama-bench`` winning:

1. ``$XPUBENCH_LLAMACPP_DIR`` (the folder, or its ``bin/``): a build of your own;
2. xpubench's cached build (``scripts/build_llamacpp.sh``, build.py): ``<cache>/llamacpp/<key>/bin``
   under ``$XDG_CACHE_HOME`` or ``~/.cache/xpubench``, the key being the pinned llama-cpp-python version and
   a digest of the CPU flags it was compiled for. Only a build whose instruction sets this CPU has is
   taken (a build for another CPU dies with "Illegal instruction");
3. ``llama-bench`` on ``PATH``.

A cached build carries ``build.json`` (version, llama.cpp commit, CMake flags, build time); a program from
elsewhere is asked ``llama-bench --version``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpubench.envnames import LLAMACPP_DIR, cache_folder

PINNED = "0.3.36"       # llama-cpp-python's source package: its vendored llama.cpp is what build.py compiles
BENCH, QUANTIZE, SERVER = "llama-bench", "llama-quantize", "llama-server"
# /proc/cpuinfo flags -> the ggml CMake option that compiles for them (GGML_NATIVE is never used: on an
# Intel AMX VM a native build died with "Illegal instruction" on a q8_0 model). GGML_AVX512 needs all five.
CPU_OPTIONS = (
    ("GGML_SSE42", ("sse4_2",)), ("GGML_AVX", ("avx",)), ("GGML_AVX2", ("avx2",)), ("GGML_FMA", ("fma",)),
    ("GGML_F16C", ("f16c",)), ("GGML_BMI2", ("bmi2",)), ("GGML_AVX_VNNI", ("avx_vnni",)),
    ("GGML_AVX512", ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")),
    ("GGML_AVX512_VBMI", ("avx512vbmi",)), ("GGML_AVX512_VNNI", ("avx512_vnni",)),
    ("GGML_AVX512_BF16", ("avx512_bf16",)),
)


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The instruction-set flags of this CPU (/proc/cpuinfo's first "flags" line; empty where unreadable)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return set()
    m = re.search(r"^flags\s*:\s*(.*)$", cpuinfo, re.MULTILINE)
    return set(m.group(1).split()) if m else set()


def cpu_options(flags: set[str]) -> dict[str, bool]:
    """Each ggml CPU option ON where this CPU has every instruction set it needs, else OFF (explicit both
    ways: nothing left to the compiler's host detection)."""
    return {option: all(f in flags for f in needs) for option, needs in CPU_OPTIONS}


def build_key(options: dict[str, bool], version: str = PINNED) -> str:
    """The cache folder's name: the version and a digest of the options that are ON."""
    on = ",".join(sorted(k for k, v in options.items() if v))
    return f"{version}-{hashlib.sha256(on.encode()).hexdigest()[:12]}"


def cache_root(environ=os.environ) -> Path:
    return cache_folder(environ) / "llamacpp"


@dataclass
class Programs:
    """llama.cpp's programs found here (``bench`` None: not found, ``missing`` says why)."""

    bench: Path | None = None
    quantize: Path | None = None
    source: str = ""                       # "XPUBENCH_LLAMACPP_DIR", "cache", "PATH"
    build: dict[str, Any] = field(default_factory=dict)   # build.json, or what --version said
    missing: str | None = None

    def record(self) -> dict[str, Any]:
        """The environment record's facts (every result's fingerprint carries them)."""
        return {"llama_bench": str(self.bench) if self.bench else None,
                "llama_quantize": str(self.quantize) if self.quantize else None,
                "found_in": self.source or None, "build": self.build, "missing": self.missing}


def _in(folder: Path) -> Path | None:
    for d in (folder, folder / "bin"):
        if (d / BENCH).is_file() and os.access(d / BENCH, os.X_OK):
            return d
    return None


def _cached(environ, flags: set[str]) -> Path | None:
    """The cached build for this CPU's options, else the newest whose ON options this CPU all has."""
    root = cache_root(environ)
    wanted = root / build_key(cpu_options(flags)) / "bin"
    if _in(wanted):
        return wanted
    usable = []
    for info in root.glob("*/build.json"):
        try:
            build = json.loads(info.read_text())
        except (OSError, ValueError):
            continue
        needs = [n for option, needs in CPU_OPTIONS if (build.get("cpu_options") or {}).get(option) for n in needs]
        if all(n in flags for n in needs) and _in(info.parent / "bin"):
            usable.append(info.parent / "bin")
    return max(usable, key=lambda p: p.stat().st_mtime, default=None)


def version_of(bench: Path) -> dict[str, Any]:
    """``llama-bench --version``: {"version": "N (commit)", "compiler", "target"} ({} if it will not say)."""
    try:
        out = subprocess.run([str(bench), "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return {}
    text = out.stdout + out.stderr
    said = re.search(r"^version:\s*(.+)$", text, re.MULTILINE)           # "0.5.0-dev (build 1, commit 0c1e570)"
    commit = re.search(r"commit (\w+)|\((\w+)\)", said.group(1)) if said else None   # or older "4000 (0c1e570)"
    built = re.search(r"built with (.+?) for (.+)$", text, re.MULTILINE)
    found = {"version": said.group(1).strip(), "commit": commit.group(1) or commit.group(2) if commit else None} \
        if said else {}
    if built:
        found.update(compiler=built.group(1), target=built.group(2))
    return found


def find(environ=os.environ, flags: set[str] | None = None) -> Programs:
    """llama.cpp's programs (module docstring for the order)."""
    flags = cpu_flags() if flags is None else flags
    folder, source = None, ""
    if environ.get(LLAMACPP_DIR):
        folder, source = _in(Path(environ[LLAMACPP_DIR]).expanduser()), LLAMACPP_DIR
        if folder is None:
            return Programs(missing=f"{LLAMACPP_DIR}={environ[LLAMACPP_DIR]} holds no executable {BENCH} "
                                    "(in it or its bin/)")
    if folder is None:
        folder, source = _cached(environ, flags), "cache"
    if folder is None:
        on_path = shutil.which(BENCH, path=environ.get("PATH"))
        folder, source = (Path(on_path).parent, "PATH") if on_path else (None, "")
    if folder is None:
        return Programs(missing=f"no {BENCH} found: build it with scripts/build_llamacpp.sh (llama-cpp-python "
                                f"{PINNED}'s llama.cpp, 21 CPU-minutes), or put it on PATH, or set {LLAMACPP_DIR}")
    bench = folder / BENCH
    quantize = folder / QUANTIZE if (folder / QUANTIZE).is_file() else None
    build: dict[str, Any] = {}
    if (folder.parent / "build.json").is_file():
        try:
            build = json.loads((folder.parent / "build.json").read_text())
        except (OSError, ValueError):
            build = {}
    return Programs(bench=bench, quantize=quantize, source=source, build=build or version_of(bench))
