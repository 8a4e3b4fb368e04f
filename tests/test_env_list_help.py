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


def every_argument():
    import argparse

    from xpubench.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in commands.choices.items():
        for action in sub._actions:
            if not isinstance(action, argparse._HelpAction):
                yield name, action


def test_every_flag_of_every_command_has_help_and_the_selftest_is_not_offered():
    import argparse

    missing = [f"{name} {'/'.join(a.option_strings) or a.dest}" for name, a in every_argument() if not a.help]
    assert not missing, missing
    hidden = [a for name, a in every_argument() if name == "run" and "--selftest" in a.option_strings]
    assert hidden and hidden[0].help == argparse.SUPPRESS       # still accepted: the isolation tests use it


def test_an_unknown_workload_does_not_offer_the_selftest():
    import pytest

    from xpubench.errors import UserError
    from xpubench.workloads import get_workload

    with pytest.raises(UserError) as caught:
        get_workload("resnet9000")
    assert "llama" in str(caught.value) and "selftest" not in str(caught.value)


def test_list_shows_llama_as_generation_and_hides_the_selftest():
    import io

    from xpubench.cli.listing import print_listing

    console = Console(file=io.StringIO(), width=200, color_system=None)
    print_listing(console)
    text = console.file.getvalue()
    llama = next(line for line in text.splitlines() if line.startswith("│ llama "))
    cells = [c.strip() for c in llama.strip("│").split("│")]
    assert cells[3:] == ["1", "-", "-", "-"]                      # generation batch 1, no training columns
    assert "--mode train: batch 4" in text and "selftest" not in text
    gpt = [c.strip() for c in next(line for line in text.splitlines()
                                   if line.startswith("│ gpt ")).strip("│").split("│")]
    assert gpt[4] == "2"                                          # gpt trains by default: its epochs stay


def test_env_at_80_columns_crops_nothing():
    """A device table wider than the terminal is said a device per line (issue 52 item 5: nothing cut)."""
    text = rendered(json.loads((MACHINES / "h100-sxm.json").read_text()), width=80)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines)
    folded = " ".join(text.split())
    assert folded.count("mem BW 3,350 GB/s") == 8 and "memory torch 79.2 GiB, jax 59.4 GiB*" in folded
    assert "cpu: name AMD EPYC; frameworks numpy, torch, jax" in " ".join(rendered(cpu_only(), width=80).split())
    wide = rendered(json.loads((MACHINES / "h100-sxm.json").read_text()), width=250)
    assert "┃ device ┃" in wide                                    # wide enough: the table
