"""The framework-free half of detection: the host's facts (``host``), the CPU's device record, the NVIDIA
driver, and reading a detected environment (``resolve_device``, ``available_devices``). Each backend's own
detection lives in its package (``Backend.detect``); backends/detect.py runs them all in a child process.

Device ids: ``cpu`` (JAX with several host devices: ``cpu``, ``cpu:1``, ...), ``gpu:N``, ``tpu:N``,
``mps``; N is the index among the backend's devices of that kind, as the backends use it.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import platform
import shutil
import socket
import subprocess
from typing import Any

from xpubench.devices.clock import cpu_clock
from xpubench.devices.cpu import cpu_info
from xpubench.devices.cpu_peak import cpu_peak_estimates
from xpubench.devices.device import Device, kind_named
from xpubench.envnames import refresh_asked
from xpubench.errors import UserError


def version_of(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def error_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def nvidia_driver() -> str | None:
    """The NVIDIA driver version: pynvml if installed, else nvidia-smi (5 s timeout), else None."""
    if installed("pynvml"):
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


def cpu_device(host_cpu: dict[str, Any], device_id: str = "cpu") -> dict[str, Any]:
    estimates = host_cpu.get("peak_estimate", {})
    return {
        "id": device_id, "kind": "cpu", "name": host_cpu.get("model") or platform.machine() or "cpu",
        "memory_bytes": host_cpu.get("memory_bytes"), "compute_capability": None, "driver": None,
        "vendor": "cpu", "peak_flops": {d: e.get("value") for d, e in estimates.items()},
        "memory_bandwidth": None, "peak_is_estimate": True,
        "peak_source": (estimates.get("fp32") or {}).get("basis"),
    }


def host(refresh: bool | None = None) -> dict[str, Any]:
    """The host's facts; the CPU's clock measured on a busy core (devices/clock.py: cached, measured again with
    ``refresh``, by default when XPUBENCH_REFRESH asks) for its peak estimate, with its spread, when it was
    measured and whether that was now (``clock_*``)."""
    cpu = cpu_info()
    clock = cpu_clock(cpu, refresh=refresh_asked() if refresh is None else refresh)
    cpu["mhz_measured"], cpu["clock_method"] = clock["mhz"], clock["method"]
    cpu.update({f"clock_{k}": clock[k] for k in ("spread", "measured_at", "fresh", "samples_mhz", "unkept")
                if k in clock})
    cpu["peak_estimate"] = cpu_peak_estimates(cpu)
    return {"hostname": socket.gethostname(), "os": platform.platform(), "kernel": platform.release(),
            "python": platform.python_version(), "cpu": cpu, "memory_bytes": cpu.get("memory_bytes")}


def available_devices(env: dict[str, Any], backend: str) -> list[str]:
    """The device ids a backend sees here ([] when it is not installed or failed)."""
    return [d["id"] for d in env.get("backends", {}).get(backend, {}).get("devices", [])]


def resolve_device(env: dict[str, Any], backend: str, requested: str) -> str:
    """A user's spelling ('cpu', 'gpu', 'cuda:1', 'tpu', 'mps', ...) -> a device id the backend has.

    Raises UserError (one line) when the backend is not installed or the device is not present; never
    falls back to the CPU.
    """
    if backend not in env.get("backends", {}):
        raise UserError(f"unknown backend {backend!r} (known: {', '.join(env.get('backends', {}))})")
    info = env["backends"][backend]
    if not info.get("installed"):
        raise UserError(f"backend {backend!r} is not installed on this machine; pip install 'xpubench[{backend}]'")
    try:
        device = Device.parse(requested)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    device_id = str(device)
    found = available_devices(env, backend)
    if device_id in found:
        return device_id
    if info.get("error") and not found:
        raise UserError(f"device {requested!r}: {backend} failed to initialise here ({info['error']})")
    why = "".join(f"; {backend}'s {platform} backend did not load: {error}"
                  for platform, error in (info.get("platform_errors") or {}).items()
                  if kind_named(platform) is device.kind)
    raise UserError(f"device {requested!r} is not available to {backend} on this machine "
                    f"(found: {', '.join(found) or 'none'}){why}")
