"""Known accelerator chips, the table: dense peak FLOP/s per dtype, memory and memory bandwidth, each with a
source (devices/specs.py looks a chip up in it by the name a framework reports).

Rules of the table:

* Every figure is the vendor's (datasheet, product page, Google Cloud TPU docs, or Google's own JAX source
  for the one TPU generation whose Cloud page no longer lists chip figures). Nothing is derived except
  the documented halvings: NVIDIA's tensor figures are printed "with sparsity", and the dense figure is
  half of it (the datasheets say so in a footnote); rows store the dense figure.
* A dtype the vendor gives no figure for is left out: devices/specs.py's ``peak_flops`` answers None
  ("n/a"), never a guess.
* Figures are per *package* as the vendor prints them (a TPU chip, a K80 board, an MI250X module).
  ``devices_per_package`` says how many framework devices one package shows as, and the per-device
  peak is the package figure divided by it:

  - TPU v2/v3: 2 TensorCores per chip and no megacore, so JAX shows one device per TensorCore: 2.
  - TPU v4/v5p: 2 TensorCores per chip fused as one megacore device: 1. (If a slice is run in split
    mode, detection counts the JAX devices sharing a chip's coordinates and divides by that instead.)
  - TPU v5e/v6e: 1 TensorCore per chip: 1.
  - Tesla K80: one board carries two GK210 GPUs, each its own CUDA device: 2.
  - MI250X: two graphics compute dies (GCDs), each its own ROCm device: 2.
* "fp32" is the plain fp32 rate (CUDA cores on NVIDIA; the FP32 *matrix* (MFMA) rate on AMD CDNA, which
  rocBLAS uses for fp32 GEMM); "tf32" is the TF32 tensor-core rate; int8 is in integer ops/s.
* Memory is the nominal figure in the unit the vendor uses (GB = 1e9 bytes, GiB = 2**30 bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

GB = 10**9
GiB = 2**30
T = 1e12


@dataclass(frozen=True, eq=False)
class ChipSpec:
    """One accelerator package with its vendor figures (dense, per package) and where they come from."""

    key: str                      # short stable id, e.g. "h100-sxm"
    name: str                     # display name
    vendor: str                   # "nvidia" | "amd" | "google"
    patterns: tuple[str, ...]     # regexes matched in full against normalise(device_name)
    peak: dict[str, float]        # dense FLOP/s (int8: ops/s) per package; missing dtype = no vendor figure
    memory_bytes: int | None      # nominal, per package
    bandwidth: float | None       # bytes/s, per package
    source: str                   # where the figures come from
    devices_per_package: int = 1  # framework devices one package shows as
    cores_per_chip: int | None = None  # TPU TensorCores per chip
    notes: str = field(default="")


def _tflops(**kw: float) -> dict[str, float]:
    return {k: v * T for k, v in kw.items()}


_CLOUD = "https://cloud.google.com/tpu/docs/"
_JAX_TPU_INFO = "JAX source jax/_src/pallas/mosaic/tpu_info.py (Google, jax 0.10.2)"
_NV = "https://www.nvidia.com/en-us/data-center/"

CHIPS: tuple[ChipSpec, ...] = (
    # ---- Google TPUs (per chip; JAX device_kind spellings from jax tpu_info.chip_version_from_device_kind)
    ChipSpec("tpu-v2", "TPU v2", "google", (r"tpu v2",), _tflops(bf16=46), 16 * GB, 716e9,
             f"{_JAX_TPU_INFO}, TPU_V2 (per-chip: bf16 4.6e13, HBM 16e9 B, 7.16e11 B/s); "
             f"{_CLOUD}v2 lists no chip figures", devices_per_package=2, cores_per_chip=2),
    ChipSpec("tpu-v3", "TPU v3", "google", (r"tpu v3",), _tflops(bf16=123), 32 * GiB, 900e9,
             f"{_CLOUD}v3 (peak compute per chip 123 TFLOPS bf16; HBM2 32 GiB, 900 GBps)",
             devices_per_package=2, cores_per_chip=2),
    ChipSpec("tpu-v4", "TPU v4", "google", (r"tpu v4",), _tflops(bf16=275, int8=275), 32 * GiB, 1200e9,
             f"{_CLOUD}v4 (peak compute per chip 275 TFLOPS bf16 or int8; HBM2 32 GiB, 1200 GBps)",
             cores_per_chip=2, notes="2 TensorCores per chip as one megacore JAX device"),
    ChipSpec("tpu-v5e", "TPU v5e", "google", (r"tpu v5 ?lite", r"tpu v5e", r"tpu v5 litepod"),
             _tflops(bf16=197, int8=393), 16 * GB, 819e9,
             f"{_CLOUD}v5e (peak per chip 197 TFLOPS bf16, 393 TOPS int8; HBM 16 GB, 819 GBps)",
             cores_per_chip=1),
    ChipSpec("tpu-v5p", "TPU v5p", "google", (r"tpu v5p?",), _tflops(bf16=459, int8=918), 95 * GB, 2765e9,
             f"{_CLOUD}v5p (peak per chip 459 TFLOPS bf16; HBM2e 95 GB, 2765 GBps); int8 918 TOPS from "
             f"{_JAX_TPU_INFO}, TPU_V5P", cores_per_chip=2,
             notes="2 TensorCores per chip as one megacore JAX device"),
    ChipSpec("tpu-v6e", "TPU v6e (Trillium)", "google", (r"tpu v6 ?lite", r"tpu v6e", r"trillium"),
             _tflops(bf16=918, int8=1836), 32 * GB, 1638e9,
             f"{_CLOUD}v6e (peak per chip 918 TFLOPS bf16, 1836 TOPS int8; HBM 32 GB, 1638 GBps)",
             cores_per_chip=1),
    ChipSpec("tpu7x", "TPU7x (Ironwood)", "google", (r"tpu ?7x", r"tpu v7x?", r"ironwood"),
             _tflops(bf16=2307), 192 * GiB, None,
             f"{_CLOUD}tpu7x (peak per chip 2307 TFLOPS bf16; HBM 192 GiB; 2 TensorCores per chip); JAX's "
             "pallas.tpu.ChipVersion: 2 TensorCores, no megacore, so one JAX device per TensorCore",
             devices_per_package=2, cores_per_chip=2, notes="no int8 figure published; bandwidth not recorded"),
    # ---- NVIDIA (dense figures; tensor rows = datasheet "with sparsity" / 2)
    ChipSpec("k80", "Tesla K80 (per GK210 GPU)", "nvidia", (r"k80",), _tflops(fp32=8.73), 24 * GB, 480e9,
             "NVIDIA Tesla K80 datasheet / board spec BD-07317-001 (per board: 8.73 TFLOPS fp32 with GPU "
             "Boost, 24 GB GDDR5, 480 GB/s; two GK210 GPUs per board) https://www.nvidia.com/en-gb/data-center/"
             "tesla-k80/", devices_per_package=2),
    ChipSpec("p100-sxm2", "Tesla P100 SXM2 16GB", "nvidia", (r"p100 sxm2 16gb",),
             _tflops(fp32=10.6, fp16=21.2), 16 * GB, 732e9,
             f"NVIDIA Tesla P100 datasheet, NVLink variant {_NV}tesla-p100/"),
    ChipSpec("p100-pcie-16gb", "Tesla P100 PCIe 16GB", "nvidia", (r"p100 pcie 16gb",),
             _tflops(fp32=9.3, fp16=18.7), 16 * GB, 732e9, f"NVIDIA Tesla P100 datasheet, PCIe 16GB {_NV}tesla-p100/"),
    ChipSpec("p100-pcie-12gb", "Tesla P100 PCIe 12GB", "nvidia", (r"p100 pcie 12gb",),
             _tflops(fp32=9.3, fp16=18.7), 12 * GB, 549e9, f"NVIDIA Tesla P100 datasheet, PCIe 12GB {_NV}tesla-p100/"),
    ChipSpec("t4", "Tesla T4", "nvidia", (r"t4",), _tflops(fp32=8.1, fp16=65, int8=130), 16 * GB, 320e9,
             f"NVIDIA T4 datasheet (8.1 TFLOPS fp32, 65 TFLOPS fp16 mixed, 130 TOPS int8; 16 GB GDDR6, "
             f"320 GB/s) {_NV}tesla-t4/"),
    ChipSpec("v100-sxm2", "Tesla V100 SXM2", "nvidia", (r"v100 sxm2 (16|32)gb",), _tflops(fp32=15.7, fp16=125),
             None, 900e9, f"NVIDIA V100 datasheet, SXM2 (15.7 TFLOPS fp32, 125 TFLOPS tensor; 900 GB/s) {_NV}v100/",
             notes="16 or 32 GB: the memory comes from the framework"),
    ChipSpec("v100-pcie", "Tesla V100 PCIe", "nvidia", (r"v100 pcie (16|32)gb",), _tflops(fp32=14, fp16=112),
             None, 900e9, f"NVIDIA V100 datasheet, PCIe (14 TFLOPS fp32, 112 TFLOPS tensor; 900 GB/s) {_NV}v100/"),
    ChipSpec("v100s-pcie", "Tesla V100S PCIe 32GB", "nvidia", (r"v100s pcie 32gb",),
             _tflops(fp32=16.4, fp16=130), 32 * GB, 1134e9,
             f"NVIDIA V100 datasheet, V100S PCIe (16.4 TFLOPS fp32, 130 TFLOPS tensor; 1134 GB/s) {_NV}v100/"),
    *(
        ChipSpec(f"a100-{form.lower()}-{mem}gb", f"A100 {form} {mem}GB", "nvidia", pats,
                 _tflops(fp32=19.5, tf32=156, bf16=312, fp16=312, int8=624), mem * GB, bw,
                 "NVIDIA A100 datasheet https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
                 "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (dense = sparse / 2)")
        for form, mem, bw, pats in (
            ("SXM4", 40, 1555e9, (r"a100 sxm4 40gb",)),
            ("SXM4", 80, 2039e9, (r"a100 sxm4 80gb",)),
            ("PCIe", 40, 1555e9, (r"a100 pcie 40gb",)),
            ("PCIe", 80, 1935e9, (r"a100 80gb pcie", r"a100 pcie 80gb")),
        )
    ),
    ChipSpec("a10g", "A10G (AWS)", "nvidia", (r"a10g",), {}, 24 * GiB, 600e9,
             "no NVIDIA datasheet exists for the AWS-only A10G, so no FLOP/s figures; 24 GiB from "
             "https://aws.amazon.com/ec2/instance-types/g5/ ; 600 GB/s from https://www.baseten.co/blog/"
             "nvidia-a10-vs-a10g-for-ml-model-inference/ (third party)"),
    ChipSpec("l4", "L4", "nvidia", (r"l4",), _tflops(fp32=30.3, tf32=60, bf16=121, fp16=121, int8=242.5),
             24 * GB, 300e9, f"NVIDIA L4 datasheet {_NV}l4/ (dense = sparse / 2)"),
    ChipSpec("l40s", "L40S", "nvidia", (r"l40s",), _tflops(fp32=91.6, tf32=183, bf16=362.05, fp16=362.05, int8=733),
             48 * GB, 864e9, f"NVIDIA L40S datasheet {_NV}l40s/ (dense column)"),
    ChipSpec("h100-sxm", "H100 SXM", "nvidia", (r"h100 80gb hbm3", r"h100 sxm5?( 80gb)?"),
             _tflops(fp32=67, tf32=494.5, bf16=989.5, fp16=989.5, int8=1979), 80 * GB, 3.35e12,
             f"NVIDIA H100 datasheet, H100 SXM {_NV}h100/ (dense = sparse / 2)"),
    ChipSpec("h100-pcie", "H100 PCIe", "nvidia", (r"h100 pcie( 80gb)?",),
             _tflops(fp32=51, tf32=378, bf16=756.5, fp16=756.5, int8=1513), 80 * GB, 2.0e12,
             f"NVIDIA H100 datasheet, H100 PCIe {_NV}h100/ (dense = sparse / 2)"),
    ChipSpec("h100-nvl", "H100 NVL", "nvidia", (r"h100 nvl( 94gb)?",),
             _tflops(fp32=60, tf32=417.5, bf16=835.5, fp16=835.5, int8=1670.5), 94 * GB, 3.9e12,
             f"NVIDIA H100 datasheet, H100 NVL {_NV}h100/ (per GPU: 60 TFLOPS fp32; tensor 835/1671/1671/3341 "
             "with sparsity; 94 GB, 3.9 TB/s; dense = sparse / 2)"),
    ChipSpec("gh200-96gb", "GH200 (96 GB HBM3)", "nvidia", (r"gh200 480gb", r"gh200 96gb"),
             _tflops(fp32=67, tf32=494.5, bf16=989.5, fp16=989.5, int8=1979), 96 * GB, 4.0e12,
             "NVIDIA GH200 Grace Hopper Superchip datasheet https://www.nvidia.com/en-us/data-center/"
             "grace-hopper-superchip/ (Hopper GPU: 67 TFLOPS fp32, 989/1979/3958 tensor with sparsity; 96 GB "
             "HBM3, 4 TB/s; dense = sparse / 2); '480GB' in the name is the Grace CPU's LPDDR5X"),
    ChipSpec("gh200-144gb", "GH200 (144 GB HBM3e)", "nvidia", (r"gh200 144g hbm3e", r"gh200 144gb( hbm3e)?"),
             _tflops(fp32=67, tf32=494.5, bf16=989.5, fp16=989.5, int8=1979), 144 * GB, 4.9e12,
             "NVIDIA GH200 Grace Hopper Superchip datasheet https://www.nvidia.com/en-us/data-center/"
             "grace-hopper-superchip/ (HBM3e version: 144 GB, 4.9 TB/s; same Hopper GPU figures, dense = "
             "sparse / 2)"),
    ChipSpec("h200", "H200 SXM", "nvidia", (r"h200( sxm)?( 141gb)?",),
             _tflops(fp32=67, tf32=494.5, bf16=989.5, fp16=989.5, int8=1979), 141 * GB, 4.8e12,
             f"NVIDIA H200 datasheet, H200 SXM {_NV}h200/ (dense = sparse / 2)"),
    ChipSpec("h200-nvl", "H200 NVL", "nvidia", (r"h200 nvl( 141gb)?",),
             _tflops(fp32=60, tf32=417.5, bf16=835.5, fp16=835.5, int8=1670.5), 141 * GB, 4.8e12,
             f"NVIDIA H200 datasheet, H200 NVL {_NV}h200/ (60 TFLOPS fp32; tensor 835/1671/1671/3341 with "
             "sparsity; 141 GB, 4.8 TB/s; dense = sparse / 2)"),
    ChipSpec("b200", "B200 (HGX)", "nvidia", (r"b200",),
             _tflops(fp32=75, tf32=1100, bf16=2250, fp16=2250, int8=4500), 180 * GB, 7.7e12,
             f"NVIDIA HGX B200 specifications, per GPU {_NV}hgx/ (dense = sparse / 2)"),
    # ---- AMD (fp32 = FP32 matrix/MFMA peak)
    ChipSpec("mi250x", "Instinct MI250X (per GCD)", "amd", (r"mi250x",),
             _tflops(fp32=95.7, bf16=383, fp16=383, int8=383), 128 * GB, 3.2e12,
             "AMD Instinct MI250X specifications (per module: FP32 matrix 95.7 TF, FP16/BF16 383 TF, INT8 383 "
             "TOPS; 128 GB HBM2e, 3.2 TB/s; two GCDs) https://www.amd.com/en/products/accelerators/instinct/"
             "mi200/mi250x.html", devices_per_package=2,
             notes="ROCm names both MI250X and MI250 'AMD Instinct MI250X/MI250': told apart by compute units"),
    ChipSpec("mi250", "Instinct MI250 (per GCD)", "amd", (r"mi250",),
             _tflops(fp32=90.5, bf16=362.1, fp16=362.1, int8=362.1), 128 * GB, 3.2e12,
             "AMD Instinct MI250 specifications (per module: FP32 matrix 90.5 TF, FP16/BF16 362.1 TF, INT8 "
             "362.1 TOPS; 128 GB HBM2e, 3.2 TB/s; two GCDs) https://www.amd.com/en/products/accelerators/"
             "instinct/mi200/mi250.html", devices_per_package=2),
    ChipSpec("mi300x", "Instinct MI300X", "amd", (r"mi300x( oam| vf)?",),
             _tflops(fp32=163.4, tf32=653.7, bf16=1307.4, fp16=1307.4, int8=2614.9), 192 * GB, 5.3e12,
             "AMD Instinct MI300X specifications (dense) https://www.amd.com/en/products/accelerators/instinct/"
             "mi300/mi300x.html", notes="'MI300X VF' (an SR-IOV virtual function in cloud VMs) is a whole MI300X"),
    ChipSpec("mi325x", "Instinct MI325X", "amd", (r"mi325x( oam)?",),
             _tflops(fp32=163.4, tf32=653.7, bf16=1307.4, fp16=1307.4, int8=2614.9), 256 * GB, 6.0e12,
             "AMD Instinct MI325X specifications (dense: FP32 matrix 163.4 TF, TF32 653.7, FP16/BF16 1307.4, "
             "INT8 2614.9 TOPS; 256 GB HBM3E, 6 TB/s) https://www.amd.com/en/products/accelerators/instinct/"
             "mi300/mi325x.html"),
)

