"""Shared test settings. Tests marked ``gpu``, ``tpu`` or ``mps`` run only where such a device exists
(docs/accelerators.md): detection runs once, in a child process (so pytest itself never initialises
CUDA or takes the TPU), and only when such tests are still selected after ``-m``."""

from __future__ import annotations

import functools

import pytest

DEVICE_MARKS = ("gpu", "tpu", "mps")


@functools.cache
def machine_environment() -> dict:
    """This machine's ``xpubench env --json`` record ({} when detection fails)."""
    from xpubench.results.fingerprint import detect_environment

    try:
        return detect_environment()
    except Exception:  # noqa: BLE001 - no environment: every device test skips
        return {}


def device_kinds(env: dict, backend: str | None = None) -> set[str]:
    return {d["kind"] for name, info in env.get("backends", {}).items() if backend in (None, name)
            for d in info.get("devices", [])}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    marked = [(item, kind) for item in items for kind in DEVICE_MARKS if item.get_closest_marker(kind)]
    if not marked:
        return
    present = device_kinds(machine_environment())
    for item, kind in marked:
        if kind not in present:
            item.add_marker(pytest.mark.skip(reason=f"needs a {kind} device, none here (docs/accelerators.md)"))
