"""What this machine has: host facts and, per installed backend, its version and devices (JSON-serialisable).

Run as ``python -m xpubench.devices.detect`` to print :func:`environment` as JSON: the parent process
calls it in a child so that it never initialises CUDA or a TPU itself. A backend that is not installed
is never imported (``importlib.util.find_spec``); one whose import or initialisation fails is recorded
with ``"error"`` and detection goes on. JAX is imported with XLA_PYTHON_CLIENT_PREALLOCATE=false so
detection never grabs GPU memory.

Device ids: ``cpu`` (JAX with several host devices: ``cpu``, ``cpu:1``, ...), ``gpu:N``, ``tpu:N``,
``mps``; N is the index among the backend's devices of that kind, as the backends use it.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from collections import Counter
from typing import Any

from xpubench.devices import specs
from xpubench.devices.cpu import cpu_info, cpu_peak_estimates
from xpubench.errors import UserError

BACKEND_NAMES = ("numpy", "torch", "jax")
_JAX_KIND = {"cpu": "cpu", "gpu": "gpu", "cuda": "gpu", "rocm": "gpu", "tpu": "tpu"}


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def nvidia_driver() -> str | None:
    """The NVIDIA driver version: pynvml if installed, else nvidia-smi (5 s timeout), else None."""
    if _installed("pynvml"):
        try:
            import pynvml

            pynvml.nvmlInit()
            try:
                version = pynvml.nvmlSystemGetDriverVersion()
            finally:
                pynvml.nvmlShutdown()
            return version.decode() if isinstance(version, bytes) else str(version)
        except Exception:  # noqa: BLE001, S110 - any NVML failure falls through to nvidia-smi
            pass
    exe = shutil.which("nvidia-smi")
    if exe:
        try:
            out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=5, check=False)
            lines = out.stdout.strip().splitlines()
            if out.returncode == 0 and lines:
                return lines[0].strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return None


def _cpu_device(host_cpu: dict[str, Any], device_id: str = "cpu") -> dict[str, Any]:
    estimates = host_cpu.get("peak_estimate", {})
    return {
        "id": device_id, "kind": "cpu", "name": host_cpu.get("model") or platform.machine() or "cpu",
        "memory_bytes": host_cpu.get("memory_bytes"), "compute_capability": None, "driver": None,
        "vendor": "cpu", "peak_flops": {d: e.get("value") for d, e in estimates.items()},
        "memory_bandwidth": None, "peak_is_estimate": True,
        "peak_source": (estimates.get("fp32") or {}).get("basis"),
    }


def _accelerator(device_id: str, kind: str, name: str, vendor: str, memory: int | None, cc: str | None,
                 driver: str | None, per_package: int | None = None) -> dict[str, Any]:
    spec = specs.lookup(name)
    return {
        "id": device_id, "kind": kind, "name": name, "memory_bytes": memory, "compute_capability": cc,
        "driver": driver, "vendor": vendor,
        "peak_flops": {d: specs.peak_flops(name, d, per_package) for d in specs.DTYPES},
        "memory_bandwidth": specs.memory_bandwidth(name, per_package),
        "peak_is_estimate": False, "peak_source": spec.source if spec else None,
    }


def _numpy(host_cpu: dict[str, Any]) -> dict[str, Any]:
    import numpy

    blas = None
    try:
        deps = numpy.show_config(mode="dicts").get("Build Dependencies", {})
        info = deps.get("blas") or {}
        blas = " ".join(str(info[k]) for k in ("name", "version") if info.get(k)) or None
    except Exception:  # noqa: BLE001 - numpy < 1.26 has no mode='dicts'
        blas = None
    return {"version": numpy.__version__, "blas": blas, "devices": [_cpu_device(host_cpu)]}


def _torch(host_cpu: dict[str, Any]) -> dict[str, Any]:
    import torch

    hip = getattr(torch.version, "hip", None)
    try:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception:  # noqa: BLE001
        cudnn = None
    out: dict[str, Any] = {"version": torch.__version__, "cuda_version": torch.version.cuda, "hip_version": hip,
                           "cudnn_version": cudnn, "devices": [_cpu_device(host_cpu)]}
    if torch.cuda.is_available():
        driver = None if hip else nvidia_driver()
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            name = p.name or getattr(p, "gcnArchName", "") or f"gpu {i}"
            dev = _accelerator(f"gpu:{i}", "gpu", name, "amd" if hip else "nvidia", int(p.total_memory),
                               None if hip else f"{p.major}.{p.minor}", driver)
            if hip:
                dev["arch"] = getattr(p, "gcnArchName", None)  # ROCm has no CUDA compute capability
            out["devices"].append(dev)
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        memory = None
        try:
            memory = int(torch.mps.recommended_max_memory())
        except Exception:  # noqa: BLE001 - older torch
            memory = None
        out["devices"].append({
            "id": "mps", "kind": "mps", "name": host_cpu.get("model") or "Apple GPU (MPS)", "memory_bytes": memory,
            "compute_capability": None, "driver": None, "vendor": "apple",
            "peak_flops": dict.fromkeys(specs.DTYPES), "memory_bandwidth": None,
            "peak_is_estimate": False, "peak_source": None})
    return out


def _jax_memory(device: Any) -> int | None:
    """XLA's allocator limit (``memory_stats()["bytes_limit"]``): on a GPU a share of the memory free when
    JAX started (``XLA_PYTHON_CLIENT_MEM_FRACTION``, 75% by default), not the card's total; the device
    record says so (``memory_is_limit``) and ``xpubench env`` labels it."""
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - not every platform has memory_stats
        return None
    limit = (stats or {}).get("bytes_limit")
    return int(limit) if limit else None


def _jax(host_cpu: dict[str, Any]) -> dict[str, Any]:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax

    default = jax.default_backend()
    found: list[Any] = []
    for platform_name in dict.fromkeys([default, "cpu"]):
        try:
            found += [d for d in jax.devices(platform_name) if d not in found]
        except RuntimeError:
            continue
    out: dict[str, Any] = {"version": jax.__version__, "jaxlib_version": _version("jaxlib"), "platform": default,
                           "devices": []}
    per_chip = Counter((getattr(d, "process_index", 0), tuple(getattr(d, "coords", ()) or ()))
                       for d in found if d.platform == "tpu" and getattr(d, "coords", None) is not None)
    index: Counter[str] = Counter()
    driver: str | None = None
    for d in found:
        kind = _JAX_KIND.get(d.platform, d.platform)
        n = index[kind]
        index[kind] += 1
        if kind == "cpu":
            out["devices"].append(_cpu_device(host_cpu, "cpu" if n == 0 else f"cpu:{n}"))
            continue
        name = getattr(d, "device_kind", "") or d.platform
        if kind == "tpu":
            coords = getattr(d, "coords", None)
            sharing = per_chip.get((getattr(d, "process_index", 0), tuple(coords)), 0) if coords is not None else 0
            dev = _accelerator(f"tpu:{n}", "tpu", name, "google", _jax_memory(d), None, None, sharing or None)
            spec = specs.lookup(name)
            dev.update(core_on_chip=getattr(d, "core_on_chip", None),
                       cores_per_chip=spec.cores_per_chip if spec else None,
                       devices_per_chip=sharing or (spec.devices_per_package if spec else None),
                       coords=list(coords) if coords is not None else None)
        else:
            amd = d.platform == "rocm" or "amd" in name.lower() or "instinct" in name.lower()
            if not amd and driver is None:
                driver = nvidia_driver()
            cc = getattr(d, "compute_capability", None)
            dev = _accelerator(f"gpu:{n}", "gpu", name, "amd" if amd else "nvidia", _jax_memory(d),
                               None if amd or cc is None else str(cc), None if amd else driver)
            dev["memory_is_limit"] = dev["memory_bytes"] is not None
        out["devices"].append(dev)
    return out


_DETECTORS = {"numpy": _numpy, "torch": _torch, "jax": _jax}


def host() -> dict[str, Any]:
    cpu = cpu_info()
    cpu["peak_estimate"] = cpu_peak_estimates(cpu)
    return {"hostname": socket.gethostname(), "os": platform.platform(), "kernel": platform.release(),
            "python": platform.python_version(), "cpu": cpu, "memory_bytes": cpu.get("memory_bytes")}


def environment() -> dict[str, Any]:
    """Host facts and, per backend, whether it is installed, its versions and its devices."""
    h = host()
    backends: dict[str, Any] = {}
    for name in BACKEND_NAMES:
        if not _installed(name):
            backends[name] = {"installed": False, "version": None, "devices": []}
            continue
        try:
            backends[name] = {"installed": True, **_DETECTORS[name](h["cpu"])}
        except Exception as exc:  # noqa: BLE001 - a broken backend is recorded, detection goes on
            backends[name] = {"installed": True, "version": _version(name), "devices": [], "error": _error(exc)}
    return {"host": h, "backends": backends}


def available_devices(env: dict[str, Any], backend: str) -> list[str]:
    """The device ids a backend sees here ([] when it is not installed or failed)."""
    return [d["id"] for d in env.get("backends", {}).get(backend, {}).get("devices", [])]


_SPELLING = re.compile(r"(cpu|gpu|cuda|rocm|tpu|mps)(?::(\d+))?")


def resolve_device(env: dict[str, Any], backend: str, requested: str) -> str:
    """A user's spelling ('cpu', 'gpu', 'cuda:1', 'tpu', 'mps', ...) -> a device id the backend has.

    Raises UserError (one line) when the backend is not installed or the device is not present; never
    falls back to the CPU.
    """
    if backend not in env.get("backends", {}):
        raise UserError(f"unknown backend {backend!r} (known: {', '.join(env.get('backends', {}) or BACKEND_NAMES)})")
    info = env["backends"][backend]
    if not info.get("installed"):
        raise UserError(f"backend {backend!r} is not installed on this machine; pip install 'xpubench[{backend}]'")
    m = _SPELLING.fullmatch(requested.strip().lower())
    if not m:
        raise UserError(f"unknown device {requested!r} (expected cpu, gpu, gpu:N, cuda:N, tpu, tpu:N or mps)")
    kind = {"cuda": "gpu", "rocm": "gpu"}.get(m.group(1), m.group(1))
    index = int(m.group(2) or 0)
    if kind == "mps" and index:
        raise UserError(f"unknown device {requested!r}: there is one mps device, spelled 'mps'")
    device_id = kind if (kind == "mps" or (kind == "cpu" and index == 0)) else f"{kind}:{index}"
    found = available_devices(env, backend)
    if device_id in found:
        return device_id
    if info.get("error") and not found:
        raise UserError(f"device {requested!r}: {backend} failed to initialise here ({info['error']})")
    raise UserError(f"device {requested!r} is not available to {backend} on this machine "
                    f"(found: {', '.join(found) or 'none'})")


def main() -> int:
    json.dump(environment(), sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
