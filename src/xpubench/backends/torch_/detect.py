"""What PyTorch sees here (run in the detection child, backends/detect.py): its versions, the CPU, every
CUDA/ROCm GPU and the MPS device."""

from __future__ import annotations

from typing import Any

from xpubench.devices import records
from xpubench.devices.detect import cpu_device, nvidia_driver


def detect(host_cpu: dict[str, Any]) -> dict[str, Any]:
    import torch

    hip = getattr(torch.version, "hip", None)
    try:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception:  # noqa: BLE001
        cudnn = None
    out: dict[str, Any] = {"version": torch.__version__, "cuda_version": torch.version.cuda, "hip_version": hip,
                           "cudnn_version": cudnn, "devices": [cpu_device(host_cpu)]}
    if torch.cuda.is_available():
        driver = None if hip else nvidia_driver()
        out["devices"] += [records.torch_gpu(i, torch.cuda.get_device_properties(i), hip, driver)
                           for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        try:
            memory = int(torch.mps.recommended_max_memory())
        except Exception:  # noqa: BLE001 - older torch
            memory = None
        out["devices"].append(records.mps(host_cpu, memory))
    return out
