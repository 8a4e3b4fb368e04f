"""Healthy or not: published *achievable* figures of known chips, each with its source, conditions and
software versions, and the one comparison xpubench makes with them.

A spec-sheet peak (devices/chips.py) is what a chip could do; a known-good figure is what someone
measured a healthy one doing, with named software. A measurement well below it points at the machine
(clocks, power cap, cooling, a noisy neighbour, older software), not at the chip. Rules:

* Every figure is copied from its source with the conditions and versions the source gives; nothing is
  derived, rounded or filled in. A chip with no published figure has none ("none published").
* A figure is compared only with a measurement of the same kind (``what``), precision and framework:
  mamf-finder's figures are torch ``matmul`` FLOP/s at bf16, the best of a shape search, so they are
  compared with xpubench's torch bf16 matmul ceiling (``xpubench ceilings``, also a shape search) and
  doctor's torch bf16 product, never with JAX, fp32 or a training throughput.
* Rows whose ``what`` no xpubench measurement produces (a time-to-accuracy record) are kept for the
  reader and compared with nothing.

mamf-finder rows: Stas Bekman, "Machine Learning Engineering", compute/accelerator/README.md, section
"Maximum Achievable Matmul FLOPS comparison table" (github.com/stas00/ml-engineering at commit
7bc7c3054eb9, 2026-08-10): "matmul with BF16 ... inputs (no sparsity) TFLOPS ... a mean of 100
iterations after 50 warmup iterations for each shape", the best shape of a brute-force search; its
caveat: "a rough estimation and shouldn't be used as absolute ... If you get a much lower performance
than the numbers in this table, check that the target hardware has an adequate cooling".
"""

from __future__ import annotations

from dataclasses import dataclass

T = 1e12
HEALTHY_SHARE = 0.90   # below: a warning. The source reports a 5%+ spread between GPUs of one node and
                       # rows measured with other torch/CUDA/ROCm releases; 10% covers both
MAMF = ("Stas Bekman, Machine Learning Engineering, compute/accelerator/README.md \"Maximum Achievable Matmul "
        "FLOPS comparison table\", github.com/stas00/ml-engineering @ 7bc7c3054eb9")
MAMF_CONDITIONS = "torch.matmul, bf16 inputs, mean of 100 iterations after 50 warm-up, best shape of a search"
CHECKS = {"nvidia": "check clocks, power cap and thermal throttling (nvidia-smi -q -d PERFORMANCE,CLOCK,POWER)",
          "amd": "check clocks, power cap and thermal throttling (amd-smi metric), and NUMA balancing "
                 "(the source: 'disabling numa_balancing ... is a must' on MI300X)"}


@dataclass(frozen=True)
class KnownGood:
    """One published achievable figure: ``value`` of ``what`` at ``precision`` on the chips ``chips``
    (devices/chips.py keys), measured with ``framework`` (``software``) under ``conditions``."""

    chips: tuple[str, ...]
    name: str            # the chip as the source names it
    what: str            # "matmul" (FLOP/s) | "cifar10_94_s" (seconds to 94% test accuracy)
    precision: str
    value: float
    unit: str            # "FLOP/s" | "s"
    framework: str
    software: str
    tool: str
    conditions: str
    source: str

    def figure(self) -> str:
        return tflops(self.value) if self.unit == "FLOP/s" else f"{self.value:g} {self.unit}"


def tflops(rate: float) -> str:
    """A rate in TFLOP/s as the source prints it (794.5 TFLOP/s; 1745 TFLOP/s, not 1.7 PFLOP/s)."""
    return f"{rate / T:,.1f} TFLOP/s"


def _mamf(chips: tuple[str, ...], name: str, tflops: float, software: str, shape: str, notes: str = "") -> KnownGood:
    conditions = f"{MAMF_CONDITIONS} ({shape})" + (f"; {notes}" if notes else "")
    return KnownGood(chips, name, "matmul", "bf16", tflops * T, "FLOP/s", "torch", f"torch {software}",
                     "mamf-finder", conditions, MAMF)


TABLE: tuple[KnownGood, ...] = (
    _mamf(("a100-sxm4-40gb", "a100-sxm4-80gb"), "NVIDIA A100 SXM", 271.2, "2.6.0+cu126", "1024x10240x5120"),
    _mamf(("a100-pcie-40gb", "a100-pcie-80gb"), "NVIDIA A100 PCIe", 252.9, "2.5.1+cu124", "2048x5120x6144"),
    _mamf(("h100-sxm",), "NVIDIA H100 SXM", 794.5, "2.7.0+cu126", "2048x2048x13312"),
    _mamf(("h200",), "NVIDIA H100 SXM (the source: 'H200 is the same')", 794.5, "2.7.0+cu126", "2048x2048x13312",
          "measured on an H100 SXM; the source gives it for the H200 too"),
    _mamf(("gh200-144gb",), "NVIDIA GH200 SXM", 828.6, "2.6.0+cu126", "1024x15360x4096",
          "the 900 W, 141 GiB HBM3e version"),
    _mamf(("b200",), "NVIDIA B200 SXM", 1745.0, "2.7.1+cu128", "1792x16128x3072"),
    _mamf(("mi300x",), "AMD MI300X", 668.4, "2.5.1+6.3.42131", "10240x15360x8192", "PYTORCH_TUNABLEOP_ENABLED=1"),
    _mamf(("mi325x",), "AMD MI325X", 784.9, "2.6.0+6.2.4", "13312x10240x8192", "PYTORCH_TUNABLEOP_ENABLED=1, 1000 W"),
    KnownGood(("a100-sxm4-40gb", "a100-sxm4-80gb"), "NVIDIA A100 (400 W)", "cifar10_94_s", "fp16", 3.83, "s", "torch",
              "torch 2.4.1", "airbench (legacy/airbench94.py)",
              "time to a mean 94.01% CIFAR-10 test accuracy, its own network and data loader (no xpubench "
              "workload measures this: shown, compared with nothing)",
              "KellerJordan/cifar10-airbench README.md (github.com/KellerJordan/cifar10-airbench @ f1c599c4af24)"),
)


def figures_for(chip: str | None) -> list[KnownGood]:
    """Every published figure of a chip (a devices/chips.py key); [] for an unknown chip or a CPU."""
    return [k for k in TABLE if chip and chip in k.chips]


def comparable(chip: str | None, what: str, precision: str, framework: str) -> KnownGood | None:
    """The figure a measurement of ``what`` at ``precision`` with ``framework`` may be compared with: same
    chip, same kind of measurement, same precision, same framework; else None (never across them)."""
    return next((k for k in figures_for(chip) if (k.what, k.precision, k.framework) == (what, precision, framework)),
                None)


def verdict(measured: float, good: KnownGood, vendor: str | None = None, chip_name: str = "this chip",
            ) -> tuple[bool, str]:
    """(healthy?, one sentence) for a measured matmul FLOP/s against its known-good figure."""
    share = measured / good.value
    said = (f"{tflops(measured)}: your {chip_name} reaches {share:.0%} of the known-good {good.figure()} "
            f"({good.tool}, {good.software})")
    if share >= HEALTHY_SHARE:
        return True, said
    check = CHECKS.get(vendor or "", CHECKS["nvidia"])
    return False, (f"{tflops(measured)} is {1 - share:.0%} below the known-good {good.figure()} for {chip_name} "
                   f"({good.tool}, {good.software}): {check}; newer software also moves this figure")


def planned(record: dict, backend: str, precisions: list[str]) -> str:
    """What ``xpubench ceilings`` would compare this device's ceilings with (one line, for --dry-run)."""
    name = record.get("name") or record.get("id") or "this device"
    found = figures_for(record.get("chip"))
    if not found:
        return f"known-good: none published for {name}"
    lines = []
    for k in found:
        if k.what != "matmul":
            lines.append(f"{k.what} {k.figure()} ({k.tool}; compared with nothing)")
            continue
        used = k.framework == backend and k.precision in precisions
        how = (f"compared with {backend}'s {k.precision} ceiling" if used else
               f"compared only with -b {k.framework} -p {k.precision}")
        lines.append(f"{k.precision} matmul {k.figure()} ({k.tool}, {k.software}; {how})")
    return f"known-good for {name}: " + "; ".join(lines)
