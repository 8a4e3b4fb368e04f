"""The device layer: known-chip specs, CPU facts and estimate, environment detection and its rendering.

Submodules are imported lazily, so ``python -m xpubench.devices.detect`` runs cleanly and importing the
package never imports a framework.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "environment": "detect", "available_devices": "detect", "resolve_device": "detect",
    "lookup": "specs", "peak_flops": "specs", "memory_bandwidth": "specs", "ChipSpec": "specs",
    "cpu_info": "cpu", "cpu_peak_estimate": "cpu", "render_environment": "render",
}
__all__ = ["ChipSpec", "available_devices", "cpu_info", "cpu_peak_estimate", "environment", "lookup",
           "memory_bandwidth", "peak_flops", "render_environment", "resolve_device"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
