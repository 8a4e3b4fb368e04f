"""Detection's parsing of what CUDA, ROCm, TPU and Apple stacks report (devices/records.py, cpu.py,
specs.py), against the strings those stacks really print (tests/machine_facts.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import machine_facts
import pytest
from machine_facts import MACHINES, JaxDevice

from xpubench.devices import cpu, records, specs
from xpubench.devices.detect import cpu_device as _cpu_device
from xpubench.devices.detect import resolve_device
from xpubench.devices.device import MPS, kind_named
from xpubench.errors import UserError

IDENTITY = ("id", "kind", "name", "vendor", "compute_capability", "arch", "memory_bytes", "chip", "compute_units",
            "devices_per_chip", "cores_per_chip", "coords", "memory_is_limit")


@pytest.mark.parametrize("name", list(machine_facts.BUILDERS))
def test_recorded_environments_are_what_detection_builds_from_the_reported_strings(name):
    """The committed files stay what today's detection makes of the facts (rewrite them with
    `python tests/machine_facts.py` after changing detection's records)."""
    recorded = json.loads((MACHINES / f"{name}.json").read_text())
    built = json.loads(json.dumps(machine_facts.BUILDERS[name]()))
    for backend, info in built["backends"].items():
        assert [{k: d.get(k) for k in IDENTITY} for d in recorded["backends"][backend]["devices"]] == \
               [{k: d.get(k) for k in IDENTITY} for d in info["devices"]], backend


def test_cuda_devices_from_torch_and_jax():
    h100 = json.loads((MACHINES / "h100-sxm.json").read_text())
    torch_gpu = h100["backends"]["torch"]["devices"][1]
    assert torch_gpu == {**torch_gpu, "id": "gpu:0", "vendor": "nvidia", "compute_capability": "9.0",
                         "chip": "h100-sxm", "driver": "550.54.15", "compute_units": 132}
    assert torch_gpu["peak_flops"]["bf16"] == pytest.approx(989.5e12) and "arch" not in torch_gpu
    jax_gpus = [d for d in h100["backends"]["jax"]["devices"] if d["kind"] == "gpu"]
    assert [d["id"] for d in jax_gpus] == [f"gpu:{i}" for i in range(8)] and jax_gpus[0]["memory_is_limit"]


def test_rocm_reports_a_gfx_arch_not_a_compute_capability():
    """Defect 4: jax on ROCm reports platform "gpu" and compute_capability "gfx942"."""
    dev = JaxDevice(platform="gpu", device_kind="AMD Instinct MI300X", compute_capability="gfx942", core_count=304,
                    stats=None)
    (record,) = records.jax_devices([dev], {}, _cpu_device, lambda: pytest.fail("no NVIDIA driver on AMD"))
    assert record["vendor"] == "amd" and record["compute_capability"] is None and record["arch"] == "gfx942"
    assert record["chip"] == "mi300x"
    for text in ("gfx942:sramecc+:xnack-", "gfx90a", "GFX1100"):
        assert records.amd_arch(text) == text.split(":")[0].lower() and records.cuda_capability(text) is None
    assert records.cuda_capability("9.0") == (9, 0) and records.cuda_capability("unknown") is None
    generic = SimpleNamespace(name="AMD Radeon Graphics", gcnArchName="gfx942:sramecc+:xnack-", major=9, minor=4,
                              total_memory=1 << 30, multi_processor_count=304)
    record = records.torch_gpu(0, generic, "6.2.41133-dd7f95766", None)
    assert record["vendor"] == "amd" and record["chip"] is None and record["peak_flops"]["bf16"] is None
    nameless = SimpleNamespace(**{**vars(generic), "name": ""})
    assert records.torch_gpu(0, nameless, "6.2", None)["name"] == "gfx942:sramecc+:xnack-"


def test_mi250x_and_mi250_share_a_rocm_name_and_are_told_apart_by_compute_units():
    props = SimpleNamespace(name="AMD Instinct MI250X/MI250", gcnArchName="gfx90a:sramecc+:xnack-", major=9,
                            minor=0, total_memory=64 << 30)
    mi250x = records.torch_gpu(0, SimpleNamespace(**vars(props), multi_processor_count=110), "6.2", None)
    mi250 = records.torch_gpu(0, SimpleNamespace(**vars(props), multi_processor_count=104), "6.2", None)
    unknown = records.torch_gpu(0, SimpleNamespace(**vars(props), multi_processor_count=96), "6.2", None)
    assert (mi250x["chip"], mi250["chip"], unknown["chip"]) == ("mi250x", "mi250", None)
    assert mi250x["peak_flops"]["bf16"] == pytest.approx(383e12 / 2) and unknown["peak_flops"]["bf16"] is None


def test_tpu_v5e_chips_from_jax():
    tpu = json.loads((MACHINES / "tpu-v5e-8.json").read_text())["backends"]["jax"]["devices"]
    chips = [d for d in tpu if d["kind"] == "tpu"]
    assert len(chips) == 8 and chips[0]["name"] == "TPU v5 lite" and chips[0]["chip"] == "tpu-v5e"
    assert chips[0]["devices_per_chip"] == 1 and chips[0]["peak_flops"]["bf16"] == pytest.approx(197e12)
    assert chips[0]["peak_flops"]["fp32"] is None and tpu[-1]["id"] == "cpu"


@pytest.mark.parametrize("platform", ["METAL", "mps"])
def test_apple_gpu_plugins_are_the_mps_device(platform):
    """Defect 7: jax-metal's platform "METAL" (and jax-mps's "mps") are the Apple GPU, kind mps."""
    host = {"model": "Apple M2"}
    (record,) = records.jax_devices([JaxDevice(platform=platform, device_kind="Metal", stats=None)], host,
                                    _cpu_device, lambda: None)
    assert record["id"] == "mps" and record["kind"] == "mps" and record["name"] == "Apple M2 GPU"
    assert kind_named(platform) is MPS


def test_mps_is_named_after_the_chip_not_the_cpu_string():
    """Defect 15: the MPS device was named "arm" (platform.processor())."""
    assert records.mps_name({"model": "Apple M2"}) == "Apple M2 GPU"
    assert records.mps_name({"model": "arm"}) == "Apple GPU (MPS)"


def test_macos_cpu_facts_come_from_sysctl_and_keep_m_series_half_precision():
    text = ("machdep.cpu.brand_string: Apple M2\nhw.physicalcpu: 8\nhw.logicalcpu: 8\nhw.memsize: 17179869184\n"
            "hw.optional.neon: 1\nhw.optional.arm.FEAT_FP16: 1\nhw.optional.arm.FEAT_BF16: 1\n")
    info = cpu.parse_sysctl(text)
    assert info["model"] == "Apple M2" and info["vendor"] == "Apple" and info["physical_cores"] == 8
    assert set(info["all_flags"]) == {"asimd", "fphp", "bf16"} and info["memory_bytes"] == 16 << 30
    assert info["mhz_current"] is None          # Apple silicon reports no clock: no peak estimate
    m1 = cpu.parse_sysctl(text.replace("FEAT_BF16: 1", "FEAT_BF16: 0").replace("Apple M2", "Apple M1"))
    assert "bf16" not in m1["all_flags"] and "fphp" in m1["all_flags"]
    from xpubench.plan import slow_cpu_dtypes

    env = json.loads((MACHINES / "apple-m2.json").read_text())
    assert slow_cpu_dtypes(env, "torch", "cpu") == []       # native bf16 and fp16: kept in the CPU sweep


@pytest.mark.parametrize(("reported", "key"), [
    ("NVIDIA H100 NVL", "h100-nvl"), ("NVIDIA GH200 480GB", "gh200-96gb"), ("NVIDIA GH200 144G HBM3e", "gh200-144gb"),
    ("NVIDIA H200 NVL", "h200-nvl"), ("NVIDIA H200", "h200"), ("AMD Instinct MI300X VF", "mi300x"),
    ("AMD Instinct MI300X OAM", "mi300x"), ("AMD Instinct MI325X", "mi325x"), ("TPU7x", "tpu7x"), ("TPU v5", "tpu-v5p"),
    ("TPU v6e", "tpu-v6e"), ("TPU v5e", "tpu-v5e"),
])
def test_the_chip_table_knows_current_names(reported, key):
    """Defect 16."""
    assert specs.lookup(reported).key == key


def test_tpu7x_is_two_jax_devices_per_chip_and_an_unknown_tpu_has_no_peak():
    assert specs.peak_flops("TPU7x", "bf16") == pytest.approx(2307e12 / 2)
    assert specs.lookup("TPU v4 lite") is None and specs.lookup("AMD Instinct MI250X/MI250") is None


def test_a_plugin_that_failed_to_load_is_named_when_its_device_is_asked_for():
    """Defect 5: JAX falls back to the CPU with a log line only; the record keeps why."""
    env = {"backends": {"jax": {"installed": True, "devices": [{"id": "cpu", "kind": "cpu"}],
                                "platform_errors": {"cuda": "Unable to load cuDNN. Is it installed?"}}}}
    with pytest.raises(UserError, match=r"\(found: cpu\); jax's cuda backend did not load: Unable to load cuDNN"):
        resolve_device(env, "jax", "gpu")
    with pytest.raises(UserError) as err:
        resolve_device(env, "jax", "tpu")
    assert "cuda" not in str(err.value)


def test_jax_platform_errors_read_jaxs_own_record(monkeypatch):
    from jax._src import hardware_utils, xla_bridge

    from xpubench.backends.jax_.detect import jax_platform_errors

    monkeypatch.setattr(xla_bridge, "_backend_errors", {"cuda": "no supported devices found for platform CUDA.",
                                                        "tpu": "Failed to open libtpu.so"})
    monkeypatch.setattr(hardware_utils, "num_available_tpu_chips_and_device_id", lambda: (0, None))
    monkeypatch.setattr(hardware_utils, "has_visible_nvidia_gpu", lambda: True)
    errors = jax_platform_errors()
    assert errors == {"cuda": "no supported devices found for platform CUDA."}   # libtpu noise without a TPU


def test_env_table_says_which_plugin_did_not_load():
    from rich.console import Console

    from xpubench.devices.render import render_environment

    env = {"host": {}, "backends": {"jax": {"installed": True, "version": "0.4.35", "devices": [],
                                            "platform_errors": {"cuda": "CUDA driver version is insufficient"}}}}
    console = Console(record=True, width=200)
    render_environment(env, console)
    assert "cuda backend did not load (so no cuda device): CUDA driver version is insufficient" in console.export_text()
