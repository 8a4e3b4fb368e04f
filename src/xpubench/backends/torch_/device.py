"""Device names, precision and autotuning settings, synchronisation, placement and peak memory for
PyTorch."""

from __future__ import annotations

import contextlib
import warnings

import torch

from xpubench.devices.device import CPU, GPU, MPS, Device
from xpubench.devices.records import tf32_problem
from xpubench.errors import UserError

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def torch_device(device_id: str) -> torch.device:
    """xpubench id ("cpu", "gpu:0", "mps") -> torch.device; refuses what is not there, never falls back."""
    device = Device.parse(device_id)
    if device.kind is CPU:
        return torch.device("cpu")
    if device.kind is GPU:
        if not torch.cuda.is_available():
            raise UserError(f"device {device_id} is not available to torch (no CUDA/ROCm device)")
        return torch.device("cuda", device.index)
    if device.kind is MPS:
        if not torch.backends.mps.is_available():
            raise UserError("device mps is not available to torch")
        return torch.device("mps")
    raise UserError(f"torch cannot run on device {device_id}")


def tf32_unavailable(device: torch.device) -> str | None:
    """Why tf32 does not apply on this device (devices/records.py tf32_problem), or None."""
    if device.type != "cuda":
        return tf32_problem("mps" if device.type == "mps" else device.type, None, None)
    if torch.version.hip:
        return tf32_problem("gpu", "amd", None)
    major, minor = torch.cuda.get_device_capability(device)
    return tf32_problem("gpu", "nvidia", f"{major}.{minor}")


def gpu_identity(device: torch.device) -> dict:
    """The GPU's vendor and UUID, for the energy meter (energy/windows.py): the UUID names the physical
    board whatever CUDA_VISIBLE_DEVICES renumbered (torch's ``get_device_properties(i).uuid``)."""
    if torch.version.hip:
        return {"vendor": "amd", "uuid": None}
    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    return {"vendor": "nvidia", "uuid": str(uuid) if uuid else None}


def set_precision_mode(precision: str) -> None:
    """fp32 means true fp32 on every chip: TF32 only when tf32 is asked for."""
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"


MIOPEN_FIND_MODE = "DYNAMIC_HYBRID"   # MIOpen's own default since ROCm 5.x: a Find-Db hit, else a find over
                                     # its dynamic kernels (seconds per shape, not minutes)


def set_autotune(device: torch.device, environ=None) -> str | None:
    """Kernel selection for convolutions, chosen on purpose and returned for the record (``autotune``).

    CUDA: ``cudnn.benchmark`` (cuDNN times its algorithms for each new input shape, in the first step),
    as XLA autotunes its kernels on GPUs, so a torch-vs-JAX comparison is between two tuned programs.

    ROCm: ``cudnn.benchmark`` stays off. Since pytorch/pytorch#145294 it asks MIOpen for an exhaustive
    search per new shape, measured at 10-15 minutes per convolution configuration on a cold cache
    (pytorch/pytorch#179795); every new shape (the first step, the last partial evaluation batch) would
    pay it and CNN cases on a fresh MI300X would time out. MIOpen's find mode is set instead:
    ``MIOPEN_FIND_MODE=DYNAMIC_HYBRID`` (MIOpen's documented default: its Find-Db, else a find over its
    dynamic kernels), unless the user set one (then theirs is kept and recorded). The find runs on the
    first call of each shape: in the first step, which is never a steady-state sample (harness/training.py),
    and in inference's untimed first call (harness/inference.py pads every batch to one shape)."""
    if device.type != "cuda":
        return None
    if torch.version.hip:
        import os

        env = os.environ if environ is None else environ
        mode = env.setdefault("MIOPEN_FIND_MODE", MIOPEN_FIND_MODE)
        torch.backends.cudnn.benchmark = False
        return f"MIOpen find mode {mode} (cudnn.benchmark off: on ROCm it is MIOpen's exhaustive search)"
    torch.backends.cudnn.benchmark = True
    return "cudnn.benchmark"


def checked_autocast(device: torch.device, precision: str):
    """``torch.autocast`` for bf16/fp16 (a no-op context otherwise) that refuses to disable itself:
    PyTorch turns autocast off with only a warning when the device lacks the dtype (MPS before macOS 14,
    bf16 on pre-Ampere CUDA in older releases), and the "bf16" case would silently train in fp32."""
    if precision not in ("bf16", "fp16"):
        return contextlib.nullcontext()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ctx = torch.autocast(device_type=device.type, dtype=DTYPES[precision])
    disabled = [str(w.message).splitlines()[0] for w in caught if "disabling autocast" in str(w.message).lower()]
    if disabled or getattr(ctx, "_enabled", True) is False:
        reason = disabled[0] if disabled else "autocast disabled itself"
        raise RuntimeError(f"{precision} autocast is not available on {device.type} here ({reason}); "
                           "the case would silently run in fp32")
    return ctx


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def placement(tensor: torch.Tensor) -> str:
    dev = tensor.device
    if dev.type == "cuda":
        return f"gpu:{dev.index or 0}"
    return dev.type


class PeakMemory:
    """The peak-memory figure of a measurement (docs/methodology.md, "Peak memory"): the highest memory
    in use between ``reset()`` (right before measuring) and ``read()``. CUDA/ROCm: the caching
    allocator's ``max_memory_allocated`` (tensors alive, the resident model and data included), reset by
    ``reset_peak_memory_stats``. CPU: the process's peak resident set (devices/memory.py). MPS: None;
    PyTorch's MPS backend keeps no high-water mark (only current_allocated_memory)."""

    def __init__(self, device: torch.device):
        self.device = device

    def reset(self) -> None:
        from xpubench.devices import memory

        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        elif self.device.type == "cpu":
            memory.reset_host_peak()

    def read(self) -> int | None:
        from xpubench.devices import memory

        if self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.device))
        if self.device.type == "cpu":
            return memory.host_peak_bytes()
        return None
