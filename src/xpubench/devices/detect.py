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
from typing import Any

from xpubench.devices import envvars, kernels, records
from xpubench.devices.clock import measured_mhz
from xpubench.devices.cpu import cpu_info, cpu_peak_estimates
from xpubench.errors import UserError

BACKEND_NAMES = ("numpy", "torch", "jax", "keras")


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
        out["devices"] += [records.torch_gpu(i, torch.cuda.get_device_properties(i), hip, driver)
                           for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        try:
            memory = int(torch.mps.recommended_max_memory())
        except Exception:  # noqa: BLE001 - older torch
            memory = None
        out["devices"].append(records.mps(host_cpu, memory))
    return out


def jax_platform_errors() -> dict[str, str]:
    """Why a JAX accelerator backend is absent, by platform: a plugin that failed to initialise (JAX then
    falls back to the CPU with a log line only; ``xla_bridge._backend_errors``), or hardware JAX can see
    without a plugin for it. Read after ``jax.devices()``; {} when nothing failed (or JAX changed its
    internals)."""
    errors: dict[str, str] = {}
    try:
        from jax._src import hardware_utils, xla_bridge

        have = set(xla_bridge.backends())
        tpu_here = hardware_utils.num_available_tpu_chips_and_device_id()[0] > 0 or _installed("libtpu")
        errors.update({k: " ".join(str(v).split())[:300] for k, v in xla_bridge._backend_errors.items()
                       if k != "tpu" or tpu_here})   # jaxlib tries libtpu on every machine: noise without one
        if "cuda" not in have and "cuda" not in errors and hardware_utils.has_visible_nvidia_gpu():
            errors["cuda"] = "an NVIDIA GPU is present but JAX has no CUDA plugin (pip install 'jax[cuda12]')"
        if "tpu" not in have and "tpu" not in errors and tpu_here:
            errors["tpu"] = "a TPU is present but JAX has no TPU support (pip install 'jax[tpu]')"
    except Exception:  # noqa: BLE001, S110 - private API: without it the record just has no errors
        pass
    return errors


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
                           "devices": records.jax_devices(found, host_cpu, _cpu_device, nvidia_driver)}
    errors = jax_platform_errors()
    if errors:
        out["platform_errors"] = errors
    return out


def _keras(host_cpu: dict[str, Any]) -> dict[str, Any]:
    """Keras 3 is found, never imported (its first import picks its backend for the process): it runs on
    the devices of the backend it runs on (keras:jax on jax's), so it lists none of its own."""
    return {"version": _version("keras"), "devices": [],
            "keras_backends": [b for b in ("jax", "torch", "tensorflow") if _installed(b)]}


_DETECTORS = {"numpy": _numpy, "torch": _torch, "jax": _jax, "keras": _keras}


def host() -> dict[str, Any]:
    """The host's facts; the CPU's clock measured on a busy core (devices/clock.py) for its peak estimate."""
    cpu = cpu_info()
    cpu["mhz_measured"], cpu["clock_method"] = measured_mhz()
    cpu["peak_estimate"] = cpu_peak_estimates(cpu)
    return {"hostname": socket.gethostname(), "os": platform.platform(), "kernel": platform.release(),
            "python": platform.python_version(), "cpu": cpu, "memory_bytes": cpu.get("memory_bytes")}


def environment() -> dict[str, Any]:
    """Host facts, per backend whether it is installed, its versions and its devices, the set
    environment variables that change results (devices/envvars.py), and the CPU kernels the backends'
    libraries chose (devices/kernels.py: read after they were imported)."""
    variables = envvars.recorded(os.environ)   # before detection sets any (JAX's preallocation, libtpu's)
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
    return {"host": h, "backends": backends, "variables": variables, "kernels": kernels.chosen(os.environ)}


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
    why = "".join(f"; {backend}'s {platform} backend did not load: {error}"
                  for platform, error in (info.get("platform_errors") or {}).items()
                  if records.kind_of_platform(platform) == kind)
    raise UserError(f"device {requested!r} is not available to {backend} on this machine "
                    f"(found: {', '.join(found) or 'none'}){why}")


def main() -> int:
    json.dump(environment(), sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
