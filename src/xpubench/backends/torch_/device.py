"""Device names, synchronisation, placement and memory for PyTorch."""

from __future__ import annotations

import torch

from xpubench.errors import UserError

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def torch_device(device_id: str) -> torch.device:
    """xpubench id ("cpu", "gpu:0", "mps") -> torch.device; refuses what is not there, never falls back."""
    kind, _, index = device_id.partition(":")
    if kind == "cpu":
        return torch.device("cpu")
    if kind == "gpu":
        if not torch.cuda.is_available():
            raise UserError(f"device {device_id} is not available to torch (no CUDA/ROCm device)")
        return torch.device("cuda", int(index or 0))
    if kind == "mps":
        if not torch.backends.mps.is_available():
            raise UserError("device mps is not available to torch")
        return torch.device("mps")
    raise UserError(f"torch cannot run on device {device_id}")


def set_precision_mode(precision: str) -> None:
    """fp32 means true fp32 on every chip: TF32 only when tf32 is asked for."""
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"


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


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_bytes(device: torch.device) -> int | None:
    """Device memory high-water mark; for the CPU the process's peak resident set size."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    if device.type == "cpu":
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    return None
