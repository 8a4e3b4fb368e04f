"""The device layer: known-chip lookup, the labelled CPU peak estimate, device resolution, `xpubench env`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from xpubench.devices import cpu, specs
from xpubench.devices.detect import environment, resolve_device
from xpubench.errors import UserError

ZEN4_CPUINFO = "\n\n".join(
    f"processor\t: {i}\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
    f"model name\t: AMD EPYC 9R14\ncpu MHz\t\t: 2600.000\nphysical id\t: 0\ncore id\t\t: {i}\n"
    "flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512_bf16 avx512_vnni\n" for i in range(2))


@pytest.mark.parametrize(("reported", "key"), [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 PCIe", "h100-pcie"), ("Tesla T4", "t4"),
    ("NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb"), ("Tesla V100-SXM2-16GB", "v100-sxm2"), ("NVIDIA L4", "l4"),
    ("TPU v4", "tpu-v4"), ("TPU v5 lite", "tpu-v5e"), ("TPU v6 lite", "tpu-v6e"), ("Tesla K80", "k80"),
    ("NVIDIA H200", "h200"),
])
def test_known_chips_are_found_by_the_names_frameworks_report(reported, key):
    assert specs.lookup(reported).key == key


def test_an_unknown_chip_has_no_peak_never_a_guess():
    assert specs.lookup("NVIDIA GeForce RTX 9999 Ti") is None
    assert specs.peak_flops("NVIDIA GeForce RTX 9999 Ti", "fp32") is None
    assert specs.memory_bandwidth("Mystery Accelerator") is None
    assert specs.peak_flops("Tesla T4", "bf16") is None          # no vendor figure for that dtype


def test_per_device_peak_divides_multi_device_packages():
    assert specs.peak_flops("TPU v3", "bf16") == pytest.approx(123e12 / 2)   # 2 JAX devices per chip
    assert specs.peak_flops("Tesla K80", "fp32") == pytest.approx(8.73e12 / 2)
    assert specs.peak_flops("NVIDIA H100 80GB HBM3", "bfloat16") == pytest.approx(989.5e12)


def test_every_chip_names_its_source_and_docs_list_it():
    table = (Path(__file__).resolve().parents[1] / "docs" / "devices.md").read_text()
    for chip in specs.CHIPS:
        assert chip.source.strip(), chip.key
        assert f"`{chip.key}`" in table, f"docs/devices.md lacks {chip.key}"


def test_cpu_peak_is_cores_x_clock_x_widest_fma_and_says_it_is_an_estimate():
    info = cpu.parse_cpuinfo(ZEN4_CPUINFO)
    present = set(info.pop("all_flags"))
    info.update(flags=[f for f in cpu.SIMD_FLAGS if f in present], usable_physical_cores=2)
    est = cpu.cpu_peak_estimate(info, "fp32")
    assert est["value"] == pytest.approx(2 * 2.6e9 * 32)          # Zen 4: 2 x 256-bit FMA pipes
    assert est["basis"].startswith("estimate:") and "Zen 4" in est["basis"]
    assert cpu.cpu_peak_estimate(info, "bf16")["value"] == pytest.approx(2 * est["value"])  # avx512_bf16
    info["flags"] = ["sse4_2", "avx", "avx2", "fma"]
    assert cpu.cpu_peak_estimate(info, "int8")["value"] is None   # no VNNI: no int8 figure at all


def test_resolve_device_never_falls_back_to_the_cpu():
    env = environment()
    assert resolve_device(env, "torch", "cpu") == "cpu"
    for backend, spelling in (("torch", "cuda"), ("jax", "tpu"), ("torch", "gpu:3"), ("jax", "mps")):
        with pytest.raises(UserError, match="not available"):
            resolve_device(env, backend, spelling)
    with pytest.raises(UserError, match="unknown device"):
        resolve_device(env, "torch", "quantum")


def test_env_command_prints_every_installed_backend_and_valid_json():
    out = subprocess.run([sys.executable, "-m", "xpubench", "env", "--json"], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    env = json.loads(out)
    assert env["host"]["cpu"]["peak_estimate"]["fp32"]["basis"]
    for name in ("numpy", "torch", "jax"):
        info = env["backends"][name]
        assert info["installed"] and info["version"] and info["devices"][0]["id"] == "cpu"
    text = subprocess.run([sys.executable, "-m", "xpubench", "env"], capture_output=True, text=True,
                          timeout=120, check=True).stdout
    assert "CPU peak (estimate)" in text and "jax" in text and "torch" in text
