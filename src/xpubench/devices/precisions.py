"""Which 16-bit formats an accelerator really computes in, so a case labelled fp16 or bf16 runs as what
its label says (docs/accelerators.md, defects 8 and 12 of the second round). Framework-free: the plan
reads it from an environment record (this machine's or another one's), the backends from the device.

- TPUs have no fp16 arithmetic: their matrix units take bf16 (and int8); the Cloud TPU pages list bf16
  and int8 peaks only, and PyTorch/XLA's maintainers answer "float16 ... is not supported on TPU. TPU
  uses bfloat16" (pytorch/xla#2939). JAX accepts float16 arrays on a TPU, so XLA must convert them (most
  likely to f32, with the product at DEFAULT precision: one bf16 pass): an "fp16" case would measure
  something else under the fp16 label. fp16 is left out of TPU sweeps and an fp16 case on a TPU is
  skipped with that reason.
- Apple M1 and M2 GPUs have no bf16 hardware: Metal emulates bfloat in software on fp32 units
  (huggingface/transformers#40458; a bf16 LoRA step 16x slower than fp16 on an M1 Max, tracel-ai/cubecl
  #1509), while fp16 is native on every Apple GPU. Their default 16-bit training format is fp16, which
  needs loss scaling, and PyTorch's GradScaler runs on MPS from torch 2.8 (pytorch/pytorch#150255;
  Hugging Face accelerate refuses a GradScaler on MPS below 2.8.0). With an older torch such a machine
  plans no 16-bit training by default, and the plan says why.
"""

from __future__ import annotations

import re

from xpubench.devices.device import MPS, TPU, kind_named

APPLE_BF16_EMULATED = ("apple m1", "apple m2")       # chip names (any variant: Pro, Max, Ultra)
MPS_FP16_TRAINING_TORCH = (2, 8)                     # torch.amp.GradScaler("mps") works from here
TPU_FP16 = ("fp16 is not a TPU format: TPUs have no fp16 arithmetic (XLA converts float16, most likely to one "
            "bf16 pass, so the case would not measure fp16); the TPU's 16-bit format is bf16")


def fp16_problem(kind) -> str | None:
    """Why an ``fp16`` case does not measure fp16 on a device of this kind (a Kind or its name; None where it
    does)."""
    return TPU_FP16 if kind_named(kind) is TPU else None


def bf16_emulated(device_name: str | None) -> bool:
    """True for the Apple GPUs whose bf16 is software-emulated (M1, M2 and their Pro/Max/Ultra)."""
    name = (device_name or "").lower()
    return any(name.startswith(chip) for chip in APPLE_BF16_EMULATED)


def release(version: str | None) -> tuple[int, ...] | None:
    """(2, 4, 1) from "2.4.1" / "2.8.0+cpu" / "2.10.0.dev20250916"; None when there is no version."""
    numbers = re.findall(r"\d+", (version or "").split("+")[0])[:3]
    return tuple(int(n) for n in numbers) if numbers else None


def mps_fp16_training_problem(torch_version: str | None) -> str | None:
    """Why fp16 training (autocast + GradScaler) cannot run on MPS with this torch (None when it can)."""
    found = release(torch_version)
    if found is not None and found[:2] >= MPS_FP16_TRAINING_TORCH:
        return None
    need = ".".join(map(str, MPS_FP16_TRAINING_TORCH))
    return (f"fp16 training on MPS needs torch >= {need} (its GradScaler runs on MPS from {need}); "
            f"this torch is {torch_version or 'unknown'}")


def training_half(record: dict, fp16_training_problem: str | None = None) -> tuple[str | None, str | None]:
    """The default 16-bit training precision of an accelerator record (``devices/records.py``) and, where
    it is not the usual bf16, one line saying why: (precision or None, note or None).
    ``fp16_training_problem``: why fp16 training cannot run with this framework here
    (``mps_fp16_training_problem`` for torch on MPS), or None."""
    from xpubench.devices.records import cuda_capability

    if record.get("vendor") == "nvidia":
        capability = cuda_capability(record.get("compute_capability"))
        if capability and capability < (8, 0):
            return "fp16", None     # pre-Ampere tensor cores (and PyTorch's autocast there) have no bf16
    if kind_named(record.get("kind")) is MPS and bf16_emulated(record.get("name")):
        why = f"bf16 is emulated on the {record.get('name')} (M1/M2 GPUs have no bf16 hardware: slower than fp32)"
        if fp16_training_problem:
            return None, (f"{why}, and {fp16_training_problem}: no 16-bit training planned; ask for it with "
                          "-p fp16 or -p bf16")
        return "fp16", f"{why}: the 16-bit training precision here is fp16, native on Apple GPUs"
    return "bf16", None
