"""`xpubench run --dry-run --env-file` of another machine (issue 32, item 7): the CPU cases of a big model on
an accelerator node are named with the `-d` that leaves them out, each device's memory and each format's
need are said once, JAX's lower GPU figure is explained, and the estimate points at the docs."""

from __future__ import annotations

from pathlib import Path

from machine_facts import MACHINES

from xpubench import cli

ROOT = Path(__file__).resolve().parents[1]


def dry_run(capsys, *args: str) -> str:
    assert cli.main(["run", "--dry-run", "-w", "llama", "--preset", "llama-8b", *args]) == 0
    return capsys.readouterr().out


def test_an_8b_model_on_an_h100_node_hints_the_gpu_and_says_each_memory_figure_once(capsys):
    out = dry_run(capsys, "--env-file", str(MACHINES / "h100-sxm.json"))
    flat = " ".join(out.split())
    assert "8 of the 16 cases run on the CPU" in flat and "`-d gpu` plans the GPU alone" in flat
    for fmt in ("fp32", "bf16", "fp16", "int8"):
        assert flat.count(f"llama-8b {fmt} needs") == 1, fmt
    assert flat.count("cpu has 2,199.0 GB") == 1 and flat.count("gpu:0 (torch) has 85.0 GB, 76.5 GB usable") == 1
    jax_line = next(line for line in out.splitlines() if "gpu:0 (jax) has 63.8 GB" in line)
    assert ("XLA's allocator limit, 75% of the card's 85.0 GB" in jax_line
            and "XLA_PYTHON_CLIENT_MEM_FRACTION" in jax_line)
    assert "fits every device" in flat and "src/xpubench" not in flat
    assert '"What the estimate assumes"' in flat
    assert "### What the estimate assumes" in (ROOT / "docs" / "accelerators.md").read_text()


def test_naming_the_devices_drops_the_hint(capsys):
    flat = " ".join(dry_run(capsys, "--env-file", str(MACHINES / "h100-sxm.json"), "-d", "cpu,gpu").split())
    assert "cases run on the CPU" not in flat
    flat = " ".join(dry_run(capsys, "--env-file", str(MACHINES / "h100-sxm.json"), "-d", "gpu").split())
    assert "cases run on the CPU" not in flat and "llama/torch/cpu" not in flat


def test_what_does_not_fit_a_tpu_is_named_with_the_cases_skipped(capsys):
    flat = " ".join(dry_run(capsys, "--env-file", str(MACHINES / "tpu-v5e-8.json"), "-d", "tpu").split())
    assert "tpu:0 has 16.9 GB, 15.2 GB usable" in flat
    assert "llama-8b bf16 needs 16.2 GB" in flat and "does not fit tpu:0 (skipped: #2)" in flat
    assert "llama-8b int8 needs 9.2 GB" in flat
