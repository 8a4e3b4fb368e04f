"""CPU facts: model, vendor, cores (logical, physical, usable by this process), clocks (cpufreq's maximum,
the OS's current reading), SIMD flags and memory, from /proc and /sys on Linux, sysctl on macOS and the
platform module elsewhere; and what identifies a CPU for the figures kept per CPU (``cpu_identity``).
The peak FLOP/s estimated from them is devices/cpu_peak.py's.
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path
from typing import Any

SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "avx512_fp16",
              "amx_bf16", "amx_int8", "amx_fp16", "amx_tile", "neon", "asimd", "sve", "sve2", "bf16", "fphp")
_SYS_CPU = Path("/sys/devices/system/cpu")


def _read(path: Path | str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """The fields that matter from /proc/cpuinfo text (x86 or AArch64)."""
    blocks = [b for b in text.strip().split("\n\n") if b.strip()]
    first: dict[str, str] = {}
    mhz: list[float] = []
    pairs: set[tuple[str, str]] = set()
    processors = 0
    for n, block in enumerate(blocks):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip().lower()] = value.strip()
        if n == 0:
            first = fields
        processors += "processor" in fields
        if "cpu mhz" in fields:
            try:
                mhz.append(float(fields["cpu mhz"]))
            except ValueError:
                pass
        if "physical id" in fields and "core id" in fields:
            pairs.add((fields["physical id"], fields["core id"]))
    flags = (first.get("flags") or first.get("features") or "").split()
    model = first.get("model name") or first.get("hardware") or first.get("processor", "")
    if model.isdigit():  # AArch64 'processor : 0'
        model = ""
    return {
        "model": model or None,
        "vendor": first.get("vendor_id") or _arm_implementer(first.get("cpu implementer")),
        "cpu_family": _int(first.get("cpu family")),
        "cpu_model": _int(first.get("model")),
        "cpu_part": first.get("cpu part"),
        "logical_cores": processors or None,
        "physical_cores": len(pairs) or None,
        "mhz_current": max(mhz) if mhz else None,
        "all_flags": flags,
    }


def _int(value: str | None) -> int | None:
    try:
        return int(value, 0) if value else None
    except ValueError:
        return None


def _arm_implementer(code: str | None) -> str | None:
    return {"0x41": "ARM", "0x61": "Apple", "0x48": "HiSilicon", "0xc0": "Ampere"}.get((code or "").lower(),
                                                                                        None if not code else code)


def _usable_cpus() -> list[int] | None:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def _topology_cores(cpus: list[int]) -> int | None:
    """Distinct (package, core) pairs among these logical CPUs, from sysfs; None when not readable."""
    seen = set()
    for cpu in cpus:
        pkg = _read(_SYS_CPU / f"cpu{cpu}/topology/physical_package_id")
        core = _read(_SYS_CPU / f"cpu{cpu}/topology/core_id")
        if pkg is None or core is None:
            return None
        seen.add((pkg.strip(), core.strip()))
    return len(seen) or None


def _max_mhz() -> float | None:
    khz = _read(_SYS_CPU / "cpu0/cpufreq/cpuinfo_max_freq")
    try:
        return int(khz) / 1000 if khz else None
    except ValueError:
        return None


def _memory_bytes() -> int | None:
    text = _read("/proc/meminfo") or ""
    m = re.search(r"^MemTotal:\s+(\d+)\s+kB", text, re.MULTILINE)
    if m:
        return int(m.group(1)) * 1024
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


# macOS has no /proc/cpuinfo: sysctl's feature keys, named as Linux names the same instructions
_DARWIN_FLAGS = {"hw.optional.neon": "asimd", "hw.optional.arm.FEAT_FP16": "fphp",
                 "hw.optional.arm.FEAT_BF16": "bf16", "hw.optional.sse4_2": "sse4_2", "hw.optional.avx1_0": "avx",
                 "hw.optional.avx2_0": "avx2", "hw.optional.fma": "fma", "hw.optional.avx512f": "avx512f"}


def parse_sysctl(text: str) -> dict[str, Any]:
    """The CPU fields from ``sysctl machdep.cpu hw`` output ("key: value" lines), as parse_cpuinfo's.
    Apple silicon reports no clock (``hw.cpufrequency_max`` is absent): no clock, so no peak estimate."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            values[key.strip()] = value.strip()
    model = values.get("machdep.cpu.brand_string") or None
    hz = _int(values.get("hw.cpufrequency_max"))
    return {
        "model": model, "vendor": "Apple" if (model or "").startswith("Apple") else values.get("machdep.cpu.vendor"),
        "cpu_family": None, "cpu_model": None, "cpu_part": None,
        "logical_cores": _int(values.get("hw.logicalcpu")), "physical_cores": _int(values.get("hw.physicalcpu")),
        "mhz_current": hz / 1e6 if hz else None, "memory_bytes": _int(values.get("hw.memsize")),
        "all_flags": [flag for key, flag in _DARWIN_FLAGS.items() if values.get(key) == "1"],
    }


def _sysctl_text() -> str | None:
    import subprocess

    try:
        out = subprocess.run(["sysctl", "machdep.cpu", "hw"], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def cpu_info() -> dict[str, Any]:
    """This machine's CPU as a JSON-serialisable dict (Linux /proc and /sys, macOS sysctl; the platform
    module elsewhere)."""
    text = _read("/proc/cpuinfo")
    darwin = None if text or platform.system() != "Darwin" else _sysctl_text()
    info = parse_cpuinfo(text) if text else parse_sysctl(darwin) if darwin else {
        "model": platform.processor() or platform.machine() or None, "vendor": None, "cpu_family": None,
        "cpu_model": None, "cpu_part": None, "logical_cores": os.cpu_count(), "physical_cores": None,
        "mhz_current": None, "all_flags": []}
    memory = info.pop("memory_bytes", None)
    usable = _usable_cpus()
    logical = info["logical_cores"] or os.cpu_count()
    all_cpus = list(range(logical)) if logical else []
    info["logical_cores"] = logical
    info["physical_cores"] = _topology_cores(all_cpus) or info["physical_cores"]
    info["usable_cores"] = len(usable) if usable is not None else logical
    info["usable_physical_cores"] = _topology_cores(usable) if usable else None
    info["mhz_max"] = _max_mhz()
    info["arch"] = platform.machine() or None
    present = set(info.pop("all_flags"))
    info["flags"] = [f for f in SIMD_FLAGS if f in present]
    info["memory_bytes"] = memory or _memory_bytes()
    return info


IDENTITY_FIELDS = ("model", "vendor", "cpu_family", "cpu_model", "cpu_part", "arch", "flags", "logical_cores",
                   "physical_cores", "usable_cores", "usable_physical_cores", "mhz_max")


def cpu_identity(info: dict[str, Any]) -> dict[str, Any]:
    """What identifies a CPU for the figures kept between runs (its measured clock, devices/clock.py; part of the
    ceilings cache's machine key): not the current clock, which changes from one reading to the next."""
    return {k: info.get(k) for k in IDENTITY_FIELDS}
