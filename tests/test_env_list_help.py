"""What a newcomer reads first (issue 32, item 8): `xpubench env` shows one device table with the frameworks
that see each device, `xpubench list` shows a workload's own modes and hides the selftest, and every flag
of `run` has help text."""

from __future__ import annotations

import json

from machine_facts import MACHINES
from rich.console import Console

from xpubench.devices.render import render_environment


def rendered(env: dict, width: int = 200) -> str:
    console = Console(record=True, width=width)
    render_environment(env, console)
    return console.export_text()


def cpu_only() -> dict:
    cpu = {"id": "cpu", "kind": "cpu", "name": "AMD EPYC", "memory_bytes": 24 << 30,
           "peak_flops": {"fp32": 195.7e9, "bf16": 195.7e9}, "peak_is_estimate": True}
    return {"host": {}, "backends": {
        "numpy": {"installed": True, "version": "2.4.6", "blas": "openblas", "devices": [cpu]},
        "torch": {"installed": True, "version": "2.13.0", "devices": [cpu]},
        "jax": {"installed": True, "version": "0.10.2", "jaxlib_version": "0.10.2", "devices": [cpu]},
        "keras": {"installed": True, "version": "3.15.1", "devices": [], "keras_backends": ["jax", "torch"]}}}


def test_env_lists_a_device_seen_by_three_frameworks_once():
    text = rendered(cpu_only())
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert len(rows) == 1 and "AMD EPYC" in rows[0] and "numpy, torch, jax" in rows[0]
    assert text.count("┏") == 1                                   # one table, not one per framework
    assert "numpy 2.4.6 (BLAS openblas), 1 device" in text and "jax 0.10.2 (jaxlib 0.10.2), 1 device" in text
    assert "keras 3.15.1: runs on its backends' devices (keras:jax, keras:torch)" in text


def test_env_gives_each_frameworks_memory_where_they_differ():
    text = rendered(json.loads((MACHINES / "h100-sxm.json").read_text()), width=250)
    gpu0 = next(line for line in text.splitlines() if line.startswith("│ gpu:0"))
    assert "torch, jax" in gpu0 and "torch 79.2 GiB, jax 59.4 GiB*" in gpu0
    assert sum(line.startswith("│ gpu:") for line in text.splitlines()) == 8
    assert "memory*: XLA's allocator limit" in text
