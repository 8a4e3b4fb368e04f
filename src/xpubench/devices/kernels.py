"""Which CPU kernels the libraries run, and whether one runs below what the CPU can do.

Every library picks its CPU kernels once per process: OpenBLAS (numpy's matmul) a kernel per core type
(``OPENBLAS_CORETYPE`` overrides it: ``Haswell`` runs AVX2 code on an AVX-512 CPU), PyTorch an ATen
build per SIMD level (``ATEN_CPU_CAPABILITY``), MKL and oneDNN the widest instructions they may use
(``MKL_ENABLE_INSTRUCTIONS``, ``ONEDNN_MAX_CPU_ISA``), XLA its target (``--xla_cpu_max_isa`` in
XLA_FLAGS). One variable can halve a figure (issue 21: numpy fp32 matmul 267 GFLOP/s with
``OPENBLAS_CORETYPE=Haswell`` on a Zen 5 VM, 505 without), so detection records what was chosen
(``chosen``, in every result's fingerprint as ``"kernels"``) and ``findings`` says which choice is
below the CPU's widest SIMD level, and why.

Readable choices: threadpoolctl's record of each BLAS/OpenMP library loaded in the process (OpenBLAS
gives its kernel as ``architecture``; file paths are left out), ``torch.backends.cpu.get_cpu_capability()``
and torch's build (BLAS, MKL and oneDNN versions, from ``torch.__config__.show()``), XLA's ISA cap.
MKL and oneDNN do not say which code path they took: only their caps (the variables) are judged.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LEVELS = ("sse", "avx", "avx2", "avx512")
LEVEL_NAMES = {"sse": "SSE", "avx": "AVX", "avx2": "AVX2", "avx512": "AVX-512"}
# OpenBLAS's x86 core names (openblas_get_corename, lower case) -> the SIMD level of their kernels
OPENBLAS_CORES = {
    **dict.fromkeys(("katmai", "coppermine", "northwood", "prescott", "banias", "core2", "penryn", "dunnington",
                     "nehalem", "atom", "athlon", "opteron", "barcelona", "bobcat", "nano"), "sse"),
    **dict.fromkeys(("sandybridge", "bulldozer", "piledriver", "steamroller"), "avx"),
    **dict.fromkeys(("haswell", "zen", "excavator"), "avx2"),
    **dict.fromkeys(("skylakex", "cooperlake", "sapphirerapids"), "avx512"),
}
TORCH_CAPABILITIES = {"default": "sse", "no avx": "sse", "avx2": "avx2", "avx512": "avx512"}
# a library's kernel level -> the variable that can force it, and the backend whose matmul shows its cost
OVERRIDES = {"openblas": "OPENBLAS_CORETYPE", "torch": "ATEN_CPU_CAPABILITY"}
# variables that cap an ISA: (variable, library it caps, backend that uses it)
CAPS = (("MKL_ENABLE_INSTRUCTIONS", "MKL (torch's fp32 matmul)", "torch"),
        ("ONEDNN_MAX_CPU_ISA", "oneDNN (torch's bf16 matmul, convolutions)", "torch"),
        ("DNNL_MAX_CPU_ISA", "oneDNN (torch's bf16 matmul, convolutions)", "torch"))


def cpu_level(flags) -> str | None:
    """The CPU's widest SIMD level from its flags (x86 only; None elsewhere)."""
    flags = set(flags or [])
    if "avx512f" in flags:
        return "avx512"
    if "avx2" in flags and "fma" in flags:
        return "avx2"
    if "avx" in flags:
        return "avx"
    return "sse" if "sse4_2" in flags else None


def isa_level(text: str | None) -> str | None:
    """The level an ISA name stands for ("AVX2", "avx512_core_bf16", "SSE4_2"), None when it is no cap."""
    name = (text or "").strip().lower()
    for token, level in (("avx512", "avx512"), ("avx10", "avx512"), ("amx", "avx512"), ("avx2", "avx2"),
                         ("avx", "avx"), ("sse", "sse")):
        if token in name:
            return level
    return None


def _used_by(path: str) -> str:
    return next((name for name in ("numpy", "scipy", "torch", "jaxlib", "sklearn") if name in path), "other")


def libraries(threadpool_info: list[dict]) -> list[dict]:
    """threadpoolctl's records without file paths (a report is shared): library, API, version, kernel
    (``architecture``: OpenBLAS and BLIS give it), threads, threading layer, and which package loaded it."""
    keep = ("internal_api", "user_api", "version", "architecture", "num_threads", "threading_layer")
    return [{**{k: info.get(k) for k in keep if info.get(k) is not None},
             "used_by": _used_by(str(info.get("filepath") or ""))} for info in threadpool_info]


def torch_build(config: str, capability: str | None, threads: int | None) -> dict[str, Any]:
    """PyTorch's CPU kernels: the ATen SIMD level it runs, and from its build config the BLAS and the MKL and
    oneDNN versions."""
    def find(pattern: str) -> str | None:
        m = re.search(pattern, config)
        return m.group(1) if m else None

    return {k: v for k, v in {
        "cpu_capability": capability, "threads": threads, "blas": find(r"BLAS_INFO=(\w+)"),
        "mkl": find(r"Math Kernel Library Version ([\d.]+)"), "onednn": find(r"MKL-DNN v([\d.]+)"),
        "openmp": find(r"OpenMP (\d+)")}.items() if v is not None}


def xla_max_isa(environ: Mapping[str, str]) -> str | None:
    m = re.search(r"--xla_cpu_max_isa=(\S+)", environ.get("XLA_FLAGS", ""))
    return m.group(1) if m else None


def chosen(environ: Mapping[str, str]) -> dict[str, Any]:
    """What the libraries loaded in this process chose (call after the backends were imported)."""
    out: dict[str, Any] = {}
    try:
        from threadpoolctl import threadpool_info

        out["libraries"] = libraries(threadpool_info())
    except Exception as exc:  # noqa: BLE001 - no threadpoolctl: the record says so, detection goes on
        out["libraries_error"] = f"{type(exc).__name__}: {exc}"[:200]
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            out["torch"] = torch_build(torch.__config__.show(), torch.backends.cpu.get_cpu_capability(),
                                       torch.get_num_threads())
        except Exception as exc:  # noqa: BLE001 - an older torch: its record says why
            out["torch"] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
    if "jax" in sys.modules:
        out["xla"] = {"max_isa": xla_max_isa(environ)}   # None: XLA compiles for this CPU's own features
    return out


@dataclass(frozen=True)
class Finding:
    """A library running kernels below the CPU's widest SIMD level."""

    library: str              # "OpenBLAS 0.3.31 (numpy)"
    kernel: str               # what it runs: "Haswell", "AVX2"
    level: str                # its level ("avx2")
    cpu: str                  # the CPU's level ("avx512")
    variable: str | None      # "OPENBLAS_CORETYPE=Haswell" when a set variable chose it, else None
    backend: str | None       # the backend whose fp32 matmul shows the cost (numpy, torch, jax)

    def sentence(self) -> str:
        why = (f"because {self.variable} is set" if self.variable else
               "chosen by the library itself (an older release that does not know this CPU?)")
        return (f"{self.library} runs its {self.kernel} kernel ({LEVEL_NAMES[self.level]}) on this "
                f"{LEVEL_NAMES[self.cpu]} CPU, {why}")


def findings(kernels: dict | None, flags, environ: Mapping[str, str]) -> list[Finding]:
    """Every recorded kernel choice below the CPU's level (``flags``: the CPU's SIMD flags); [] when the
    CPU's level is unknown (not x86) or nothing is below it."""
    top = cpu_level(flags)
    kernels = kernels or {}
    if top is None:
        return []
    rank = LEVELS.index
    out: list[Finding] = []
    for lib in kernels.get("libraries") or []:
        arch = str(lib.get("architecture") or "")
        level = OPENBLAS_CORES.get(arch.lower()) if lib.get("internal_api") == "openblas" else None
        if level and rank(level) < rank(top):
            set_to = environ.get(OVERRIDES["openblas"])
            backend = lib.get("used_by") if lib.get("used_by") in ("numpy", "torch") else None
            out.append(Finding(f"OpenBLAS {lib.get('version') or ''} ({lib.get('used_by')})".replace("  ", " "),
                               arch, level, top, f"{OVERRIDES['openblas']}={set_to}" if set_to else None, backend))
    capability = str((kernels.get("torch") or {}).get("cpu_capability") or "")
    level = TORCH_CAPABILITIES.get(capability.lower())
    if level and rank(level) < rank(top):
        set_to = environ.get(OVERRIDES["torch"])
        out.append(Finding("PyTorch's ATen CPU kernels", capability, level, top,
                           f"{OVERRIDES['torch']}={set_to}" if set_to else None, "torch"))
    caps = [(name, library, backend) for name, library, backend in CAPS if environ.get(name)]
    if xla_max_isa(environ):
        caps.append(("XLA_FLAGS", "XLA (jax's CPU code)", "jax"))
    for name, library, backend in caps:
        value = xla_max_isa(environ) if name == "XLA_FLAGS" else environ[name]
        level = isa_level(value)
        if level and rank(level) < rank(top):
            variable = f"--xla_cpu_max_isa={value} in XLA_FLAGS" if name == "XLA_FLAGS" else f"{name}={value}"
            out.append(Finding(library, value, level, top, variable, backend))
    return out


def describe(kernels: dict | None) -> dict[str, str]:
    """The recorded choices as label -> text, for the report's environment table and compare."""
    kernels = kernels or {}
    out: dict[str, str] = {}
    for lib in kernels.get("libraries") or []:
        if lib.get("user_api") != "blas":
            continue
        text = " ".join(str(lib[k]) for k in ("internal_api", "version") if lib.get(k))
        if lib.get("architecture"):
            text += f", {lib['architecture']} kernel"
        if lib.get("num_threads"):
            text += f", {lib['num_threads']} threads"
        out[f"{lib.get('used_by', 'other')} BLAS kernel"] = text
    torch = kernels.get("torch") or {}
    if torch.get("cpu_capability"):
        parts = [f"ATen {torch['cpu_capability']}", f"BLAS {torch['blas']}" if torch.get("blas") else "",
                 f"MKL {torch['mkl']}" if torch.get("mkl") else "", f"oneDNN {torch['onednn']}" if torch.get("onednn")
                 else "", f"{torch['threads']} threads" if torch.get("threads") else ""]
        out["torch CPU kernels"] = ", ".join(p for p in parts if p)
    if "xla" in kernels:
        cap = (kernels.get("xla") or {}).get("max_isa")
        out["XLA CPU target"] = f"capped at {cap} (--xla_cpu_max_isa)" if cap else "this CPU's own features"
    return out
