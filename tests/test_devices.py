"""The device layer: known-chip lookup, the labelled CPU peak estimate, device resolution, `xpubench env`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import this_machine

from xpubench import cli
from xpubench.backends.detect import environment
from xpubench.devices import chips, cpu, cpu_peak, specs
from xpubench.devices.detect import available_devices, resolve_device
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
    for chip in chips.CHIPS:
        assert chip.source.strip(), chip.key
        assert f"`{chip.key}`" in table, f"docs/devices.md lacks {chip.key}"


def test_cpu_peak_is_cores_x_clock_x_widest_fma_and_says_it_is_an_estimate():
    info = cpu.parse_cpuinfo(ZEN4_CPUINFO)
    present = set(info.pop("all_flags"))
    info.update(flags=[f for f in cpu.SIMD_FLAGS if f in present], usable_physical_cores=2)
    est = cpu_peak.cpu_peak_estimate(info, "fp32")
    assert est["value"] == pytest.approx(2 * 2.6e9 * 32)          # Zen 4: 2 x 256-bit FMA pipes
    assert est["basis"].startswith("estimate:") and "Zen 4" in est["basis"]
    assert cpu_peak.cpu_peak_estimate(info, "bf16")["value"] == pytest.approx(2 * est["value"])  # avx512_bf16
    info["flags"] = ["sse4_2", "avx", "avx2", "fma"]
    assert cpu_peak.cpu_peak_estimate(info, "int8")["value"] is None   # no VNNI: no int8 figure at all


def test_the_estimate_uses_the_clock_measured_under_load_and_says_when_it_is_no_upper_bound():
    """Issue 21: a VM's /proc/cpuinfo clock (2.6 GHz) is below the clock its cores run at: matmuls read
    115-155% of a peak built on it. A measured clock (or cpufreq's maximum) makes the estimate a bound."""
    info = cpu.parse_cpuinfo(ZEN4_CPUINFO)
    present = set(info.pop("all_flags"))
    info.update(flags=[f for f in cpu.SIMD_FLAGS if f in present], usable_physical_cores=2)
    reported = cpu_peak.cpu_peak_estimate(info, "fp32")
    assert reported["upper_bound"] is False and "not an upper bound" in reported["basis"]
    measured = cpu_peak.cpu_peak_estimate({**info, "mhz_measured": 3680.0}, "fp32")
    assert measured["value"] == pytest.approx(2 * 3.68e9 * 32) and measured["upper_bound"] is True
    assert "3.68 GHz" in measured["basis"] and "measured on one busy core" in measured["basis"]
    assert "reports 2.60 GHz" in measured["basis"]
    higher_max = cpu_peak.cpu_peak_estimate({**info, "mhz_measured": 3680.0, "mhz_max": 4000.0}, "fp32")
    assert higher_max["value"] == pytest.approx(2 * 4.0e9 * 32) and "cpuinfo_max_freq" in higher_max["basis"]


def test_the_clock_is_the_slope_between_two_chain_lengths_and_nonsense_is_rejected():
    from xpubench.devices import clock

    fixed = 20e-6                                   # a call's fixed cost drops out of the slope
    short = fixed + clock.CYCLES_PER_ROUND * clock.ROUNDS_PER_ITERATION * clock.ITERATIONS[0] / 3.5e9
    long = fixed + clock.CYCLES_PER_ROUND * clock.ROUNDS_PER_ITERATION * clock.ITERATIONS[1] / 3.5e9
    assert clock.slope_ghz(short, long) == pytest.approx(3.5)
    assert clock.slope_ghz(long, short) is None                              # longer chain faster: broken
    assert clock.slope_ghz(0.0, 1.0) is None                                 # 0.0007 GHz: not a clock


@pytest.mark.slow
def test_the_clock_chain_compiles_and_gives_a_clock_on_this_machine():
    """The chain really runs here through the installed JAX (each measurement a clock within SANE_GHZ), and the
    host record carries it (measured, or this CPU's cached figure) into the estimate's basis."""
    from xpubench.devices import clock
    from xpubench.devices.detect import host

    samples, method = clock.measured_mhz()
    assert samples and all(clock.SANE_GHZ[0] <= mhz / 1000 <= clock.SANE_GHZ[1] for mhz in samples), method
    cpu_record = host()["cpu"]
    assert cpu_record["mhz_measured"] and "measured on one busy core" in cpu_record["peak_estimate"]["fp32"]["basis"]


def _absent(env: dict, backend: str, spelling: str) -> str:
    """``spelling`` (cuda, gpu, tpu, mps) made to name a device this machine really lacks: index 0
    where the backend sees none of the kind, else the index just past the last one."""
    kind = {"cuda": "gpu"}.get(spelling, spelling)
    have = [d for d in available_devices(env, backend) if d.split(":")[0] == kind]
    if have and kind == "mps":
        pytest.skip(f"{backend} has an mps device here")
    return f"{spelling}:{len(have)}" if have else spelling


def test_resolve_device_never_falls_back_to_the_cpu():
    env = environment()
    assert resolve_device(env, "torch", "cpu") == "cpu"
    for backend, spelling in (("torch", "cuda"), ("jax", "tpu"), ("torch", "gpu"), ("jax", "gpu"),
                              ("jax", "mps")):
        absent = _absent(env, backend, spelling)
        with pytest.raises(UserError, match="not available"):
            resolve_device(env, backend, absent)
    with pytest.raises(UserError, match="not available"):
        resolve_device(env, "torch", f"gpu:{len(available_devices(env, 'torch')) + 3}")
    with pytest.raises(UserError, match="unknown device"):
        resolve_device(env, "torch", "quantum")


@pytest.mark.slow
def test_env_command_prints_every_installed_backend_and_valid_json(monkeypatch, capsys):
    """``xpubench env --json`` and ``xpubench env`` print this machine's record, detected once per test run by
    the function the command calls (backends/detect.py ``environment``, in conftest's detection process), not
    detected again here (~5 CPU s: every framework imported again). The command as its own process, its
    detection real: test_kernels' test_env_json_records_the_variable_and_openblas_kernel_it_picked_here."""
    monkeypatch.setattr("xpubench.backends.detect.environment", this_machine)
    assert cli.main(["env", "--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert env["host"]["cpu"]["peak_estimate"]["fp32"]["basis"]
    for name in ("numpy", "torch", "jax"):
        info = env["backends"][name]
        assert info["installed"] and info["version"] and info["devices"][0]["id"] == "cpu"
    assert cli.main(["env"]) == 0
    text = capsys.readouterr().out
    assert "CPU peak (estimate)" in text and "jax" in text and "torch" in text


def test_env_table_shows_tpu_cores_known_tf32_fp16_peaks_and_labels_an_allocator_limit():
    from rich.console import Console

    from xpubench.devices.render import render_environment

    tpu = {"id": "tpu:0", "kind": "tpu", "name": "TPU v3", "memory_bytes": 16 << 30, "cores_per_chip": 2,
           "devices_per_chip": 2, "peak_flops": {"fp32": None, "bf16": 61.5e12}, "peak_is_estimate": False}
    gpu = {"id": "gpu:0", "kind": "gpu", "name": "NVIDIA A100-SXM4-40GB", "memory_bytes": 30 << 30,
           "memory_is_limit": True, "compute_capability": "8.0",
           "peak_flops": {"fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12, "fp16": 312e12}}
    env = {"host": {}, "backends": {"jax": {"installed": True, "version": "0", "devices": [tpu, gpu]}}}
    console = Console(record=True, width=250)
    render_environment(env, console)
    text = console.export_text()
    assert "2 devices" in text and "TPU cores" in text and "2 cores/chip, 2 devices/chip" in text
    assert "peak tf32" in text and "156.0 TFLOP/s" in text and "peak fp16" in text
    assert "30.0 GiB*" in text and "allocator limit" in text and "16.0 GiB*" not in text
