"""What JAX sees here (run in the detection child, backends/detect.py): its versions, platform, devices
and why an accelerator plugin did not load."""

from __future__ import annotations

import os
from typing import Any

from xpubench.devices import records
from xpubench.devices.detect import cpu_device, installed, nvidia_driver, version_of


def jax_platform_errors() -> dict[str, str]:
    """Why a JAX accelerator backend is absent, by platform: a plugin that failed to initialise (JAX then
    falls back to the CPU with a log line only; ``xla_bridge._backend_errors``), or hardware JAX can see
    without a plugin for it. Read after ``jax.devices()``; {} when nothing failed (or JAX changed its
    internals)."""
    errors: dict[str, str] = {}
    try:
        from jax._src import hardware_utils, xla_bridge

        have = set(xla_bridge.backends())
        tpu_here = hardware_utils.num_available_tpu_chips_and_device_id()[0] > 0 or installed("libtpu")
        errors.update({k: " ".join(str(v).split())[:300] for k, v in xla_bridge._backend_errors.items()
                       if k != "tpu" or tpu_here})   # jaxlib tries libtpu on every machine: noise without one
        if "cuda" not in have and "cuda" not in errors and hardware_utils.has_visible_nvidia_gpu():
            errors["cuda"] = "an NVIDIA GPU is present but JAX has no CUDA plugin (pip install 'jax[cuda12]')"
        if "tpu" not in have and "tpu" not in errors and tpu_here:
            errors["tpu"] = "a TPU is present but JAX has no TPU support (pip install 'jax[tpu]')"
    except Exception:  # noqa: BLE001, S110 - private API: without it the record just has no errors
        pass
    return errors


def detect(host_cpu: dict[str, Any]) -> dict[str, Any]:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax

    default = jax.default_backend()
    found: list[Any] = []
    for platform_name in dict.fromkeys([default, "cpu"]):
        try:
            found += [d for d in jax.devices(platform_name) if d not in found]
        except RuntimeError:
            continue
    out: dict[str, Any] = {"version": jax.__version__, "jaxlib_version": version_of("jaxlib"), "platform": default,
                           "devices": records.jax_devices(found, host_cpu, cpu_device, nvidia_driver)}
    errors = jax_platform_errors()
    if errors:
        out["platform_errors"] = errors
    return out
