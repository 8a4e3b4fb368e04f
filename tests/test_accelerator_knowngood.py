"""Healthy or not: the published known-good figures (devices/knowngood.py), compared only like with like,
in `xpubench ceilings` (its dry run plans a recorded machine) and in `xpubench doctor`."""

from __future__ import annotations

import json
import shlex

import pytest
from machine_facts import MACHINES

from xpubench.cli import main
from xpubench.devices import chips, knowngood
from xpubench.doctor import checks

H100 = MACHINES / "h100-sxm.json"


def test_every_figure_names_a_known_chip_its_source_its_software_and_conditions():
    keys = {c.key for c in chips.CHIPS}
    for k in knowngood.TABLE:
        assert k.chips and set(k.chips) <= keys, k.name
        assert k.source and k.software and k.conditions and k.tool and k.value > 0
    by_chip = {(c, k.what, k.precision): k.value for k in knowngood.TABLE for c in k.chips}
    assert by_chip[("h100-sxm", "matmul", "bf16")] == 794.5e12          # as published, not rounded
    assert by_chip[("a100-sxm4-80gb", "matmul", "bf16")] == 271.2e12
    assert by_chip[("mi300x", "matmul", "bf16")] == 668.4e12
    assert "PYTORCH_TUNABLEOP_ENABLED=1" in knowngood.comparable("mi300x", "matmul", "bf16", "torch").conditions
    assert by_chip[("gh200-144gb", "matmul", "bf16")] == 828.6e12
    assert by_chip[("a100-sxm4-40gb", "cifar10_94_s", "fp16")] == 3.83


def test_a_figure_is_compared_only_with_the_same_measurement_precision_and_framework():
    assert knowngood.comparable("h100-sxm", "matmul", "bf16", "torch").value == 794.5e12
    assert knowngood.comparable("h100-sxm", "matmul", "fp32", "torch") is None     # another precision
    assert knowngood.comparable("h100-sxm", "matmul", "bf16", "jax") is None       # another framework
    assert knowngood.comparable("a100-sxm4-40gb", "cifar10_94_s", "fp16", "jax") is None
    assert knowngood.comparable(None, "matmul", "bf16", "torch") is None          # a CPU, an unknown chip
    assert knowngood.figures_for("tpu-v5e") == []


def test_the_verdict_says_how_close_or_what_to_check():
    good = knowngood.comparable("h100-sxm", "matmul", "bf16", "torch")
    healthy, said = knowngood.verdict(0.92 * good.value, good, "nvidia", "H100")
    assert healthy and "your H100 reaches 92% of the known-good 794.5 TFLOP/s (mamf-finder, torch 2.7.0+cu126)" in said
    healthy, said = knowngood.verdict(0.75 * good.value, good, "nvidia", "H100")
    assert not healthy and "25% below the known-good 794.5 TFLOP/s" in said and "thermal throttling" in said
    mi = knowngood.comparable("mi300x", "matmul", "bf16", "torch")
    assert "numa_balancing" in knowngood.verdict(0.5 * mi.value, mi, "amd", "MI300X")[1]


def test_ceilings_dry_run_names_the_known_good_figure_of_a_recorded_h100(capsys):
    assert main(shlex.split(f"ceilings --dry-run -p fp32,bf16 -b torch,jax -d gpu:0 --env-file {H100}")) == 0
    out = capsys.readouterr().out
    assert "nothing is measured" in out
    assert ("known-good for NVIDIA H100 80GB HBM3: bf16 matmul 794.5 TFLOP/s (mamf-finder, torch 2.7.0+cu126; "
            "compared with torch's bf16 ceiling)") in out
    assert "compared only with -b torch -p bf16" in out                     # jax's ceiling is not compared


def test_ceilings_dry_run_here_says_none_is_published(capsys, monkeypatch):
    env = json.loads(H100.read_text())
    monkeypatch.setattr("xpubench.backends.detect.environment", lambda: env)   # this machine: its CPU, no GPU
    assert main(shlex.split("ceilings --dry-run -b numpy")) == 0
    assert "known-good: none published for Intel(R) Xeon(R) Platinum 8480C" in capsys.readouterr().out


def test_ceilings_env_file_without_dry_run_is_one_line_and_exit_2(capsys):
    assert main(shlex.split(f"ceilings --env-file {H100}")) == 2
    err = capsys.readouterr().err
    assert "use it with --dry-run" in err and len(err.strip().splitlines()) == 1


def test_cached_ceilings_are_compared_with_their_known_good_figure():
    from xpubench.cli.ceilings import known_good_lines

    env = json.loads(H100.read_text())
    ceiling = {"backend": "torch", "device": "gpu:0", "precision": "bf16", "flops_per_s": 600e12, "shape": [8192] * 3,
               "best_window_flops_per_s": None, "cv": None, "ci95_low_flops_per_s": None, "ci95_high_flops_per_s": None}
    cpu = {**ceiling, "device": "cpu", "precision": "fp32", "flops_per_s": 1e12}
    lines = known_good_lines(env, {"ceilings": {"a": ceiling, "b": cpu, "c": {**ceiling, "backend": "jax"}}})
    assert len(lines) == 2
    assert (lines[0].startswith("torch gpu:0 bf16: 600.0 TFLOP/s is 24% below the known-good 794.5")
            and "[WARN]" in lines[0])
    assert lines[1] == "torch cpu: known-good: none published for Intel(R) Xeon(R) Platinum 8480C"


@pytest.mark.parametrize(("share", "status"), [(0.95, checks.PASS), (0.6, checks.WARN)])
def test_doctor_compares_its_bf16_product_with_the_known_good_figure(share, status):
    from xpubench import doctor

    env = json.loads(H100.read_text())
    config = doctor.probe_config(env, "torch", "gpu:0")
    measured = {"ceiling": {"fp32": 50e12, "bf16": share * 794.5e12}}
    rows = [r for r in doctor.verdicts(env, config, measured) if r.check == "known-good"]
    assert [r.status for r in rows] == [status] and "known-good 794.5 TFLOP/s" in rows[0].reason
    jax_rows = doctor.verdicts(env, doctor.probe_config(env, "jax", "gpu:0"), measured)
    assert not [r for r in jax_rows if r.check == "known-good"]      # mamf-finder measured torch, not XLA
