"""What six accelerator machines' frameworks report, as objects with the same fields, and the
``xpubench env --json`` record xpubench's detection builds from them (tests/data/machines/*.json).

The device strings are the ones these stacks really report (sources in tests/data/machines/README.md):
torch ``get_device_properties`` (name, major/minor, gcnArchName, total_memory, multi_processor_count),
JAX's ``platform`` / ``device_kind`` / ``compute_capability`` / ``coords``. These describe machines for
planning and for detection's parsing; no figure in them is a measurement.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from xpubench.devices import cpu, cpu_peak, records
from xpubench.devices.detect import cpu_device as _cpu_device

MACHINES = Path(__file__).parent / "data" / "machines"
MiB = 1 << 20


class JaxDevice(SimpleNamespace):
    """A JAX device as detection reads it."""

    def memory_stats(self):
        return self.stats


def _host(hostname, os_name, model, vendor, family, logical, physical, flags, memory, mhz=None, arch="x86_64"):
    info = {"model": model, "vendor": vendor, "cpu_family": family, "cpu_model": None, "cpu_part": None,
            "logical_cores": logical, "physical_cores": physical, "mhz_current": mhz, "usable_cores": logical,
            "usable_physical_cores": physical, "mhz_max": mhz, "arch": arch,
            "flags": [f for f in cpu.SIMD_FLAGS if f in flags], "memory_bytes": memory}
    info["peak_estimate"] = cpu_peak.cpu_peak_estimates(info)
    return {"hostname": hostname, "os": os_name, "kernel": None, "python": "3.11.9", "cpu": info,
            "memory_bytes": memory}


H100_PROPS = SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, total_memory=81090 * MiB,
                             multi_processor_count=132)
H200_PROPS = SimpleNamespace(name="NVIDIA H200", major=9, minor=0, total_memory=143156 * MiB, multi_processor_count=132)
A100_PROPS = SimpleNamespace(name="NVIDIA A100-SXM4-80GB", major=8, minor=0, total_memory=84_987_740_160,
                             multi_processor_count=108)
MI300X_PROPS = SimpleNamespace(name="AMD Instinct MI300X", major=9, minor=4, gcnArchName="gfx942:sramecc+:xnack-",
                               total_memory=196288 * MiB, multi_processor_count=304)
SAPPHIRE_RAPIDS = {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "avx512_vnni",
                   "amx_tile", "amx_bf16", "amx_int8"}
GENOA = {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni"}


def h100_sxm() -> dict:
    """8 x H100 SXM (a DGX H100 / HGX node): torch 2.4.1+cu124 and jax 0.4.35 with jax-cuda12-plugin."""
    host = _host("h100-node", "Linux-5.15.0-113-generic-x86_64-with-glibc2.35", "Intel(R) Xeon(R) Platinum 8480C",
                 "GenuineIntel", 6, 224, 112, SAPPHIRE_RAPIDS, 2 * 1024**4, mhz=3800.0)
    gpus = [JaxDevice(platform="gpu", device_kind="NVIDIA H100 80GB HBM3", compute_capability="9.0", core_count=132,
                      id=i, process_index=0, stats={"bytes_limit": int(0.75 * 81090 * MiB)}) for i in range(8)]
    return _environment(host, torch={"version": "2.4.1+cu124", "cuda_version": "12.4", "hip_version": None,
                                     "cudnn_version": 90100, "gpus": [H100_PROPS] * 8, "driver": "550.54.15"},
                        jax={"version": "0.4.35", "platform": "gpu", "devices": gpus, "driver": "550.54.15"})


def h200_sxm() -> dict:
    """8 x H200 SXM (a DGX/HGX H200 node) as a site installs it, a few releases behind: torch 2.6.0+cu126
    and jax 0.5.3 with jax-cuda12-plugin, flax and optax (the oldest releases the accelerator check supports)."""
    host = _host("h200-node", "Linux-5.15.0-122-generic-x86_64-with-glibc2.35", "Intel(R) Xeon(R) Platinum 8480C",
                 "GenuineIntel", 6, 224, 112, SAPPHIRE_RAPIDS, 2 * 1024**4, mhz=3800.0)
    gpus = [JaxDevice(platform="gpu", device_kind="NVIDIA H200", compute_capability="9.0", core_count=132,
                      id=i, process_index=0, stats={"bytes_limit": int(0.75 * 143156 * MiB)}) for i in range(8)]
    return _environment(host, torch={"version": "2.6.0+cu126", "cuda_version": "12.6", "hip_version": None,
                                     "cudnn_version": 90501, "gpus": [H200_PROPS] * 8, "driver": "560.35.03"},
                        jax={"version": "0.5.3", "platform": "gpu", "devices": gpus, "driver": "560.35.03"},
                        packages={"torch": "2.6.0+cu126", "jax": "0.5.3", "jaxlib": "0.5.3", "flax": "0.10.4",
                                  "optax": "0.2.4", "keras": None})


def a100_sxm4() -> dict:
    """8 x A100 SXM4 80GB (a DGX A100 node): torch 2.7.1+cu126 and jax 0.6.2 with jax-cuda12-plugin, but no
    flax or optax (the site installed jax alone): JAX measures its ceilings, its models are left out."""
    host = _host("a100-node", "Linux-5.4.0-216-generic-x86_64-with-glibc2.31", "AMD EPYC 7742 64-Core Processor",
                 "AuthenticAMD", 23, 256, 128, {"sse4_2", "avx", "avx2", "fma"}, 1024**4, mhz=2250.0)
    gpus = [JaxDevice(platform="gpu", device_kind="NVIDIA A100-SXM4-80GB", compute_capability="8.0", core_count=108,
                      id=i, process_index=0, stats={"bytes_limit": int(0.75 * 84_987_740_160)}) for i in range(8)]
    return _environment(host, torch={"version": "2.7.1+cu126", "cuda_version": "12.6", "hip_version": None,
                                     "cudnn_version": 90501, "gpus": [A100_PROPS] * 8, "driver": "570.133.20"},
                        jax={"version": "0.6.2", "platform": "gpu", "devices": gpus, "driver": "570.133.20"},
                        packages={"torch": "2.7.1+cu126", "jax": "0.6.2", "jaxlib": "0.6.2", "flax": None,
                                  "optax": None, "keras": None})


def tpu_v5e_8() -> dict:
    """A TPU v5e-8 VM (ct5lp-hightpu-8t: 8 chips as a 2x4 slice, 224 vCPUs, 384 GB): jax[tpu] 0.4.35."""
    host = _host("t1v-n-v5e8-w-0", "Linux-6.5.0-1013-gcp-x86_64-with-glibc2.35", "AMD EPYC 7B13", "AuthenticAMD",
                 25, 224, 112, {"sse4_2", "avx", "avx2", "fma"}, 384 * 10**9, mhz=2450.0)
    chips = [JaxDevice(platform="tpu", device_kind="TPU v5 lite", coords=(x, y, 0), core_on_chip=0, id=2 * y + x,
                       process_index=0, stats={"bytes_limit": 16_909_336_576}) for y in range(4) for x in range(2)]
    return _environment(host, jax={"version": "0.4.35", "platform": "tpu", "devices": chips})


def mi300x() -> dict:
    """8 x MI300X: torch 2.5.1+rocm6.2 and jax 0.4.35 built for ROCm 6.2 (platform "gpu", compute
    capability the gfx version)."""
    host = _host("mi300x-node", "Linux-5.15.0-119-generic-x86_64-with-glibc2.35", "AMD EPYC 9654 96-Core Processor",
                 "AuthenticAMD", 25, 384, 192, GENOA, 2304 * 10**9, mhz=3707.0)
    gpus = [JaxDevice(platform="gpu", device_kind="AMD Instinct MI300X", compute_capability="gfx942", core_count=304,
                      id=i, process_index=0, stats={"bytes_limit": int(0.75 * 196288 * MiB)}) for i in range(8)]
    return _environment(host, torch={"version": "2.5.1+rocm6.2", "cuda_version": None,
                                     "hip_version": "6.2.41133-dd7f95766", "cudnn_version": 3002000,
                                     "gpus": [MI300X_PROPS] * 8, "driver": None},
                        jax={"version": "0.4.35", "platform": "gpu", "devices": gpus, "driver": None})


def apple_m2() -> dict:
    """A MacBook Air with an Apple M2 (8 CPU cores, 16 GB): torch 2.4.1 with MPS; CPU facts from sysctl."""
    sysctl = ("machdep.cpu.brand_string: Apple M2\nhw.physicalcpu: 8\nhw.logicalcpu: 8\nhw.memsize: 17179869184\n"
              "hw.optional.neon: 1\nhw.optional.arm.FEAT_FP16: 1\nhw.optional.arm.FEAT_BF16: 1\n")
    parsed = cpu.parse_sysctl(sysctl)
    host = _host("m2-air", "macOS-14.6.1-arm64-arm-64bit", parsed["model"], parsed["vendor"], None,
                 parsed["logical_cores"], parsed["physical_cores"], set(parsed["all_flags"]), parsed["memory_bytes"],
                 arch="arm64")
    return _environment(host, torch={"version": "2.4.1", "cuda_version": None, "hip_version": None,
                                     "cudnn_version": None, "gpus": [], "mps_memory": 11_453_251_584})


def _environment(host: dict, torch: dict | None = None, jax: dict | None = None, packages: dict | None = None) -> dict:
    """The record ``xpubench env --json`` prints on that machine, built by detection's own functions."""
    host_cpu = host["cpu"]
    backends = {"numpy": {"installed": True, "version": "1.26.4", "blas": "openblas 0.3.23",
                          "devices": [_cpu_device(host_cpu)]}}
    if torch is None:
        backends["torch"] = {"installed": False, "version": None, "devices": []}
    else:
        devices = [_cpu_device(host_cpu)]
        devices += [records.torch_gpu(i, p, torch["hip_version"], torch.get("driver"))
                    for i, p in enumerate(torch["gpus"])]
        if "mps_memory" in torch:
            devices.append(records.mps(host_cpu, torch["mps_memory"]))
        backends["torch"] = {"installed": True, "version": torch["version"], "cuda_version": torch["cuda_version"],
                             "hip_version": torch["hip_version"], "cudnn_version": torch["cudnn_version"],
                             "devices": devices}
    if jax is None:
        backends["jax"] = {"installed": False, "version": None, "devices": []}
    else:
        found = [*jax["devices"], JaxDevice(platform="cpu", device_kind="cpu", id=0, process_index=0, stats=None)]
        backends["jax"] = {"installed": True, "version": jax["version"], "jaxlib_version": jax["version"],
                           "platform": jax["platform"],
                           "devices": records.jax_devices(found, host_cpu, _cpu_device, lambda: jax.get("driver"))}
    record = {"host": host, "backends": backends, "variables": {}}
    return record if packages is None else {**record, "packages": {"numpy": "1.26.4", **packages}}


BUILDERS = {"h100-sxm": h100_sxm, "h200-sxm": h200_sxm, "a100-sxm4-80gb": a100_sxm4, "tpu-v5e-8": tpu_v5e_8,
            "mi300x": mi300x, "apple-m2": apple_m2}


def write_all() -> None:
    """Rewrite tests/data/machines/*.json from the facts above (after a change to detection's records)."""
    for name, build in BUILDERS.items():
        (MACHINES / f"{name}.json").write_text(json.dumps(build(), indent=1) + "\n")


if __name__ == "__main__":
    write_all()
