"""CPU facts (model, cores, clock, SIMD flags, memory) and a *labelled estimate* of the CPU's peak FLOP/s.

The estimate is cores x clock x FLOP/cycle/core of the widest fused multiply-add (FMA) the CPU has.
Every assumption it makes is written into the ``basis`` string it returns, e.g.
``estimate: 2 cores x 3.50 GHz x 64 FLOP/cycle (AVX-512 on Zen 5: 2x512-bit FMA); clock: ...``.

FLOP/cycle/core for fp32, counting an FMA as 2 FLOPs:

==========================================  ======  ==========================================
SIMD path                                    FLOP/c  why
==========================================  ======  ==========================================
AVX-512, 2 x 512-bit FMA units              64      Intel Xeon Scalable Skylake-SP and later; AMD Zen 5
                                                    desktop/server (full 512-bit datapath)
AVX-512 on Zen 4, Zen 5 mobile              32      executed as 2 x 256-bit FMA pipes
AVX-512, 1 FMA unit (client Intel)          32      Ice Lake / Tiger Lake / Rocket Lake client cores
AVX2 + FMA, 2 x 256-bit units               32      Intel Haswell and later big cores; AMD Zen 2 / 3
AVX2 + FMA on Zen 1 / Zen+                  16      2 x 128-bit FMA pipes
AVX without FMA                             16      one 8-wide add + one 8-wide multiply per cycle
SSE2                                        8       one 4-wide add + one 4-wide multiply per cycle
AArch64 NEON/ASIMD                          16      assumed 2 x 128-bit FMA pipes (Neoverse N1/N2);
                                                    Neoverse V1/V2 and Apple cores have 4 (underestimate)
==========================================  ======  ==========================================

Other dtypes: bf16 doubles the fp32 rate with AVX512-BF16 (``vdpbf16ps``: 2 bf16 products per fp32 lane),
fp16 doubles it with AVX512-FP16 (32 fp16 lanes per zmm), int8 is 4x with VNNI (``vpdpbusd``: 4 int8
products per 32-bit lane); Intel AMX (Sapphire Rapids and later) does 1024 bf16/fp16 FLOP/cycle/core and
2048 int8 ops/cycle/core (Intel: "2048 INT8 or 1024 BF16 operations per cycle"). CPUs have no TF32: the
tf32 figure is the fp32 rate. Without a native instruction a dtype is assumed to run at the fp32 rate
(bf16/fp16, an upper bound) or gets no estimate (int8).

Cores: the physical cores among the CPUs this process may run on (SMT siblings share FMA units), else
the usable logical CPUs (said in ``basis``). Clock: the higher of the clock measured on a busy core
(``mhz_measured``, devices/clock.py) and cpufreq's ``cpuinfo_max_freq`` (the highest clock the kernel
knows): both are upper bounds of what the cores run at with every core busy, so the estimate is one too.
Without either, /proc/cpuinfo's current "cpu MHz", which under a hypervisor is often the base clock and
understates the boost clock: the basis then says the estimate is no upper bound
(``peak_is_upper_bound``).
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


def _fp32_per_cycle(info: dict[str, Any]) -> tuple[float | None, str]:
    """(fp32 FLOP/cycle/core, why) from the flags and the vendor/model; the conservative value when unsure."""
    flags = set(info.get("flags") or [])
    vendor = (info.get("vendor") or "").lower()
    model = (info.get("model") or "").lower()
    family = info.get("cpu_family")
    amd, intel = "amd" in vendor, "intel" in vendor
    if "avx512f" in flags:
        if amd and family == 0x19:
            return 32, "AVX-512 on Zen 4: 2x256-bit FMA"
        if amd and family == 0x1A:
            if "ryzen ai" in model:
                return 32, "AVX-512 on mobile Zen 5: 2x256-bit FMA"
            return 64, "AVX-512 on Zen 5: 2x512-bit FMA"
        if intel and "xeon" in model and not re.search(r"bronze|silver", model):
            return 64, "AVX-512 on Intel Xeon: 2 FMA units"
        if intel and "xeon" in model:
            return 32, "AVX-512 on Xeon Bronze/Silver: assuming 1 FMA unit (conservative)"
        if intel:
            return 32, "AVX-512 on a client Intel core: assuming 1 FMA unit (conservative)"
        return 32, "AVX-512 on an unrecognised CPU: assuming 2x256-bit FMA (conservative)"
    if "avx2" in flags and "fma" in flags:
        if amd and family == 0x17 and (info.get("cpu_model") or 0) < 0x30:
            return 16, "AVX2 on Zen 1/Zen+: 2x128-bit FMA"
        if amd or intel:
            return 32, "AVX2: 2x256-bit FMA (Haswell+ / Zen 2+)"
        return 32, "AVX2 on an unrecognised vendor: assuming 2x256-bit FMA"
    if "avx" in flags:
        return 16, "AVX without FMA: 8-wide add + 8-wide multiply"
    if "asimd" in flags or "neon" in flags or (info.get("arch") or "").lower() in ("aarch64", "arm64"):
        return 16, "AArch64 NEON: assuming 2x128-bit FMA pipes (conservative)"
    if (info.get("arch") or "").lower() in ("x86_64", "amd64", "i686", "i386") or "sse4_2" in flags:
        return 8, "SSE2: assuming 4-wide add + 4-wide multiply (conservative: no AVX flags seen)"
    return None, "unknown architecture: no SIMD flags recognised, no assumption made"


def _reported(info: dict[str, Any]) -> str:
    mhz = info.get("mhz_current")
    return f"; the OS reports {mhz / 1000:.2f} GHz" if mhz else ""


def clock_said(info: dict[str, Any]) -> str:
    """Whether the measured clock was read from the cache or measured now, and its spread (devices/clock.py):
    " (cached 2026-12-07, ±1%)", " (measured now, ±1%)"; "" for a record without them (an older one)."""
    when = info.get("clock_measured_at")
    if not when:
        return ""
    spread = info.get("clock_spread")
    return (f" ({'measured now' if info.get('clock_fresh') else f'cached {str(when)[:10]}'}"
            + (f", ±{spread:.0%})" if spread is not None else ")"))


def _clock(info: dict[str, Any]) -> tuple[float | None, str, bool]:
    """(GHz, where it comes from, whether it is an upper bound of the clock under load)."""
    measured, top = info.get("mhz_measured"), info.get("mhz_max")
    if measured and (not top or measured >= top):
        return measured / 1000, f"measured on one busy core{clock_said(info)}{_reported(info)}", True
    if top:
        said = f"; measured on one busy core: {measured / 1000:.2f} GHz{clock_said(info)}" if measured else ""
        return top / 1000, f"cpufreq cpuinfo_max_freq{said}", True
    if info.get("mhz_current"):
        why = "/proc/cpuinfo 'cpu MHz' (current; may understate boost: not an upper bound)"
        return info["mhz_current"] / 1000, why, False
    return None, "no clock known", False


def _cores(info: dict[str, Any]) -> tuple[int | None, str]:
    if info.get("usable_physical_cores"):
        return info["usable_physical_cores"], "physical cores usable by this process"
    if info.get("usable_cores"):
        return info["usable_cores"], "usable logical CPUs (physical count unknown; SMT would overstate)"
    return info.get("logical_cores"), "logical CPUs"


def _dtype_factor(info: dict[str, Any], dtype: str, fp32: float) -> tuple[float | None, str]:
    """(FLOP/cycle/core for this dtype, why) given the fp32 figure."""
    flags = set(info.get("flags") or [])
    if dtype in ("fp32", "float32"):
        return fp32, ""
    if dtype == "tf32":
        return fp32, "; CPUs have no TF32: fp32 rate"
    if dtype in ("bf16", "bfloat16"):
        if "amx_bf16" in flags:
            return 1024, "; AMX-BF16: 1024 FLOP/cycle/core (Intel)"
        if "avx512_bf16" in flags:
            return 2 * fp32, "; AVX512-BF16 vdpbf16ps: 2x the fp32 rate"
        return fp32, "; no native bf16 dot product: assumed at most the fp32 rate"
    if dtype in ("fp16", "float16"):
        if "amx_fp16" in flags:
            return 1024, "; AMX-FP16: 1024 FLOP/cycle/core (Intel)"
        if "avx512_fp16" in flags:
            return 2 * fp32, "; AVX512-FP16: 2x the fp32 rate"
        return fp32, "; no native fp16 arithmetic: assumed at most the fp32 rate"
    if dtype == "int8":
        if "amx_int8" in flags:
            return 2048, "; AMX-INT8: 2048 ops/cycle/core (Intel)"
        if "avx512_vnni" in flags:
            return 4 * fp32, "; AVX512-VNNI vpdpbusd: 4x the fp32 rate (ops)"
        if "avx_vnni" in flags:
            return 4 * min(fp32, 32), "; AVX-VNNI vpdpbusd (256-bit): 4x the AVX2 fp32 rate (ops)"
        return None, "; no int8 dot-product instructions"
    return None, f"; no estimate for dtype {dtype!r}"


def cpu_peak_estimate(info: dict[str, Any], dtype: str = "fp32") -> dict[str, Any]:
    """{"value": FLOP/s or None, "basis": "estimate: ...", "upper_bound": bool}: cores x clock x FLOP/cycle,
    assumptions spelled out; ``upper_bound`` False when the clock is only the OS's current reading."""
    fpc, why = _fp32_per_cycle(info)
    cores, cores_why = _cores(info)
    ghz, clock_why, bound = _clock(info)
    if fpc is None:
        return {"value": None, "basis": f"no estimate: {why}"}
    per_cycle, dtype_why = _dtype_factor(info, dtype, fpc)
    if per_cycle is None:
        return {"value": None, "basis": f"no estimate{dtype_why}"}
    if not cores or not ghz:
        return {"value": None, "basis": f"no estimate: {cores_why if not cores else clock_why}"}
    unit = "ops" if dtype == "int8" else "FLOP"
    basis = (f"estimate: {cores} cores x {ghz:.2f} GHz x {per_cycle:g} {unit}/cycle ({why}{dtype_why}); "
             f"cores: {cores_why}; clock: {clock_why}")
    return {"value": float(cores * ghz * 1e9 * per_cycle), "basis": basis, "upper_bound": bound}


def cpu_peak_estimates(info: dict[str, Any], dtypes: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "int8")
                       ) -> dict[str, dict[str, Any]]:
    """``cpu_peak_estimate`` for each dtype."""
    return {d: cpu_peak_estimate(info, d) for d in dtypes}
