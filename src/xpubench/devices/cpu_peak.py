"""A *labelled estimate* of a CPU's peak FLOP/s, made from its facts (devices/cpu.py's ``cpu_info``)
and the clock measured on a busy core (devices/clock.py).

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

import re
from typing import Any


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
