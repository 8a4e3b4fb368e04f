"""The environment variables that change what a benchmark measures: one home for their names.

Each is recorded in every result's fingerprint (``backends/fingerprint.py``, ``"env"``) and shown by
``xpubench report``/``compare`` (``report/tables/environment.py``) and ``xpubench doctor``. Those marked
*silent* change the precision, the placement or the timing of the work behind the label xpubench
gives it (an "fp32" matmul that runs as TF32, an "mps" case whose missing operators run on the CPU):
a run warns about them before it starts and ``xpubench doctor`` fails on them. Those marked *kernel*
pick which CPU kernels run or where their threads sit (devices/kernels.py records what each library
then chose; ``xpubench doctor`` warns when one runs below what the CPU can do).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from xpubench.results.redact import redacted_value


@dataclass(frozen=True)
class EnvVar:
    name: str        # a full name, or a prefix ending in "_*" (every variable starting with it)
    changes: str     # what it changes, in one line
    silent: bool = False
    kernel: bool = False   # picks CPU kernels or pins their threads


VARIABLES: tuple[EnvVar, ...] = (
    EnvVar("OMP_NUM_THREADS", "threads of the CPU kernels (OpenMP: PyTorch, oneDNN, OpenBLAS)"),
    EnvVar("MKL_NUM_THREADS", "threads of Intel MKL's kernels"),
    EnvVar("OMP_WAIT_POLICY", "how idle OpenMP threads wait for work (ACTIVE spins, PASSIVE sleeps): small ops' time"),
    EnvVar("KMP_BLOCKTIME", "how long Intel OpenMP's idle threads spin before they sleep"),
    EnvVar("OPENBLAS_NUM_THREADS", "threads of OpenBLAS (numpy's matmul)"),
    EnvVar("XLA_FLAGS", "XLA compiler and runtime flags (autotuning level, simulated host devices, ...)"),
    EnvVar("LIBTPU_INIT_ARGS", "libtpu's compiler and runtime flags"),
    EnvVar("JAX_PLATFORMS", "which JAX backends load ('cpu' hides every accelerator from JAX)"),
    EnvVar("JAX_DEFAULT_MATMUL_PRECISION", "JAX's default matmul precision (xpubench sets fp32 and tf32 "
           "cases explicitly; bf16/fp16 cases use the default)"),
    EnvVar("JAX_ENABLE_X64", "64-bit default dtypes in JAX"),
    EnvVar("XLA_PYTHON_CLIENT_*", "JAX's GPU memory: preallocation (xpubench workers: false unless set), "
           "the share of memory it may use, its allocator"),
    EnvVar("CUDA_VISIBLE_DEVICES", "which NVIDIA GPUs are visible, and their numbering"),
    EnvVar("HIP_VISIBLE_DEVICES", "which AMD GPUs HIP shows, and their numbering"),
    EnvVar("ROCR_VISIBLE_DEVICES", "which AMD GPUs the ROCm runtime shows"),
    EnvVar("TPU_*", "the TPU runtime: visible chips, process bounds, topology"),
    EnvVar("PYTORCH_CUDA_ALLOC_CONF", "PyTorch's CUDA caching allocator (peak memory, fragmentation)"),
    EnvVar("PYTORCH_HIP_ALLOC_CONF", "PyTorch's ROCm caching allocator (peak memory, fragmentation)"),
    EnvVar("CUBLAS_WORKSPACE_CONFIG", "cuBLAS workspace size (can change which kernels run)"),
    EnvVar("MIOPEN_FIND_MODE", "how MIOpen picks convolution kernels on ROCm (xpubench workers: DYNAMIC_HYBRID "
           "unless set; NORMAL is the full search)"),
    EnvVar("MIOPEN_FIND_ENFORCE", "forces MIOpen's search or its database updates on ROCm"),
    EnvVar("TORCHINDUCTOR_CACHE_DIR", "torch.compile's cache (set by the user: compile_s may be a cache hit; "
           "xpubench workers otherwise start with an empty one)"),
    EnvVar("TRITON_CACHE_DIR", "Triton's kernel cache (as TORCHINDUCTOR_CACHE_DIR)"),
    EnvVar("JAX_COMPILATION_CACHE_DIR", "JAX's persistent compilation cache (compile_s may be a cache hit)"),
    EnvVar("NVIDIA_TF32_OVERRIDE", "0: TF32 off everywhere (tf32 cases run as fp32); 1: cuBLAS/cuDNN may "
           "use TF32 for fp32 work", silent=True),
    EnvVar("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1: PyTorch's fp32 matmuls may run as TF32", silent=True),
    EnvVar("PYTORCH_ENABLE_MPS_FALLBACK", "1: operators MPS lacks run on the CPU without an error", silent=True),
    EnvVar("CUDA_LAUNCH_BLOCKING", "1: every CUDA launch waits for the kernel (no asynchronous dispatch: "
           "slower, other timings)", silent=True),
    EnvVar("OPENBLAS_CORETYPE", "which OpenBLAS kernel numpy's matmul runs (Haswell: AVX2 code even on an "
           "AVX-512 CPU)", kernel=True),
    EnvVar("OPENBLAS_L2_SIZE", "the L2 cache size OpenBLAS blocks its matmul for", kernel=True),
    EnvVar("MKL_ENABLE_INSTRUCTIONS", "the widest SIMD Intel MKL may use (PyTorch's fp32 CPU matmul)", kernel=True),
    EnvVar("MKL_DEBUG_CPU_TYPE", "MKL's code path on AMD CPUs (MKL before 2020.1)", kernel=True),
    EnvVar("ONEDNN_MAX_CPU_ISA", "the widest SIMD oneDNN may use (PyTorch's bf16 matmul, convolutions)", kernel=True),
    EnvVar("DNNL_MAX_CPU_ISA", "the widest SIMD oneDNN may use (older name of ONEDNN_MAX_CPU_ISA)", kernel=True),
    EnvVar("ATEN_CPU_CAPABILITY", "which SIMD build of PyTorch's CPU kernels runs (default, avx2, avx512)",
           kernel=True),
    EnvVar("TF_ENABLE_ONEDNN_OPTS", "TensorFlow's oneDNN kernels on or off (Keras on TensorFlow)", kernel=True),
    EnvVar("MALLOC_TRIM_THRESHOLD_", "when glibc's malloc gives freed memory back to the OS: a CPU training "
           "step that frees its activations faults them in again next step (up to half of its CPU time)"),
    EnvVar("MALLOC_MMAP_THRESHOLD_", "the size from which glibc's malloc maps each block afresh (pages faulted in "
           "at every use; set, it also stops the threshold from adapting)"),
    EnvVar("MALLOC_TOP_PAD_", "how much freed memory glibc's malloc keeps at the heap's top"),
    EnvVar("MALLOC_ARENA_MAX", "how many malloc arenas glibc keeps for a process's threads"),
    EnvVar("GLIBC_TUNABLES", "glibc's tunables, malloc's thresholds and arenas among them"),
    EnvVar("LD_PRELOAD", "libraries loaded first: an allocator (jemalloc, tcmalloc) replacing malloc, or "
           "another library's symbols"),
    EnvVar("OMP_PROC_BIND", "OpenMP thread pinning (PyTorch, oneDNN)", kernel=True),
    EnvVar("OMP_PLACES", "where OpenMP threads may run", kernel=True),
    EnvVar("KMP_AFFINITY", "Intel OpenMP thread pinning", kernel=True),
    EnvVar("GOMP_CPU_AFFINITY", "GNU OpenMP thread pinning", kernel=True),
)


def _matches(var: EnvVar, name: str) -> bool:
    return name.startswith(var.name[:-1]) if var.name.endswith("*") else name == var.name


def describe(name: str) -> EnvVar | None:
    """The entry that covers ``name`` (exact name or prefix), or None when it changes nothing recorded."""
    return next((v for v in VARIABLES if _matches(v, name)), None)


def recorded(environ: Mapping[str, str]) -> dict[str, str]:
    """The result-changing variables set in ``environ`` ({name: value}, sorted): a fingerprint's "env". A
    secret among them (``TPU_API_KEY``, a token in ``XLA_FLAGS``) is recorded REDACTED (results/redact.py)."""
    return {k: redacted_value(k, environ[k]) for k in sorted(environ) if describe(k) is not None}


def silent_changes(environ: Mapping[str, str]) -> list[str]:
    """One line per set variable that silently changes precision, placement or timing."""
    return [f"{k}={v}: {describe(k).changes}" for k, v in recorded(environ).items() if describe(k).silent]


def plan_warnings(environ: Mapping[str, str], kinds: Iterable[str]) -> list[str]:
    """What a run warns about before it starts: the silent variables that touch the planned device kinds
    (the TF32 and launch ones on GPUs, the MPS fallback on mps)."""
    kinds = set(kinds)
    touches = {"NVIDIA_TF32_OVERRIDE": "gpu", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "gpu",
               "CUDA_LAUNCH_BLOCKING": "gpu", "PYTORCH_ENABLE_MPS_FALLBACK": "mps"}
    return [f"{line} (recorded in every result)" for line in silent_changes(environ)
            if touches.get(line.split("=")[0]) in kinds]


# names without wildcards, in a fixed order: the rows of a report's environment table
NAMES: tuple[str, ...] = tuple(v.name for v in VARIABLES if not v.name.endswith("*"))
KERNEL_NAMES: tuple[str, ...] = tuple(v.name for v in VARIABLES if v.kernel)
