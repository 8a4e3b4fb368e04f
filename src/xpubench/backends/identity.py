"""What identifies a machine and its software, for what xpubench keeps between runs on it: the measured
ceilings (ceilings/cache.py, where the two parts are described) and the timing history the estimates learn
from (launch/history.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from xpubench.devices import envvars
from xpubench.devices.cpu import cpu_identity
from xpubench.devices.device import kind_of
from xpubench.version import __version__

VERSION_FIELDS = ("version", "jaxlib_version", "cuda_version", "hip_version", "cudnn_version", "blas")
ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "XLA_FLAGS", "CUDA_VISIBLE_DEVICES",
            "HIP_VISIBLE_DEVICES", *envvars.KERNEL_NAMES)


def machine_key(env: dict[str, Any], environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The identity of this machine and software, from ``backends.detect.environment()``'s record."""
    host = env.get("host", {})
    cpu = host.get("cpu", {})
    backends = env.get("backends", {})
    accelerators = sorted({(d.get("kind"), d.get("id"), d.get("name"), d.get("compute_capability"))
                           for info in backends.values() for d in info.get("devices", [])
                           if kind_of(d.get("kind")).accelerator},
                          key=str)
    drivers = sorted({str(d["driver"]) for info in backends.values() for d in info.get("devices", [])
                      if d.get("driver")})
    return {
        "hardware": {"cpu": cpu_identity(cpu), "memory_bytes": host.get("memory_bytes"),
                     "accelerators": [list(a) for a in accelerators]},
        "software": {"xpubench": __version__,
                     "backends": {name: {k: info.get(k) for k in VERSION_FIELDS if info.get(k) is not None}
                                  for name, info in sorted(backends.items()) if info.get("installed")},
                     "drivers": drivers, "env": {k: environ.get(k) for k in ENV_VARS}},
    }
