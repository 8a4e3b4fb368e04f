"""The device layer, framework-free: known-chip specs, CPU facts and estimate, host detection, reading a
detected environment and rendering it. (Each framework's detection is its backend's: backends/detect.py.)

Submodules are imported lazily: importing the package never imports a framework.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "available_devices": "detect", "resolve_device": "detect",
    "lookup": "specs", "peak_flops": "specs", "memory_bandwidth": "specs", "ChipSpec": "chips",
    "cpu_info": "cpu", "cpu_peak_estimate": "cpu_peak", "render_environment": "render",
}
__all__ = ["ChipSpec", "available_devices", "cpu_info", "cpu_peak_estimate", "lookup",
           "memory_bandwidth", "peak_flops", "render_environment", "resolve_device"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
