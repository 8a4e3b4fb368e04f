"""int8 inference for PyTorch models with PyTorch's own eager-mode dynamic quantization.

``torch.ao.quantization.quantize_dynamic`` swaps, on a copy of the model:
- ``nn.Linear``, ``nn.LSTM``, ``nn.GRU`` -> their dynamic int8 versions: weights int8 with one scale
  per output channel (``per_channel_dynamic_qconfig``); at run time each input is quantized to 8 bits
  with a scale computed from that tensor, the matmul runs int8 x int8 -> int32 (fbgemm / x86 kernels),
  the result is rescaled to fp32, biases stay fp32;
- ``nn.Embedding`` -> a weight-only 8-bit table with one scale and offset per row
  (``float_qparams_weight_only_qconfig``); a lookup has no matmul to quantize.
Convolutions and batch norm stay fp32 (eager static quantization would need QuantStub/DeQuantStub edits
of each model and a calibration pass; not done). These kernels run on the CPU only.

torch 2.13 still ships ``torch.ao.quantization`` but warns on import-time use that it is deprecated in
favour of torchao (whose ``quantize_`` covers ``nn.Linear`` only, not the LSTM/GRU that matter here).
Those two warnings (the deprecation notice and "quantized tensor creation functions are deprecated"),
and only those, are silenced by message while the model is converted.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from xpubench.harness.inference import NotApplicable

SILENCED = (r"torch\.ao\.quantization is deprecated", r".*quantized tensor creation functions.*deprecated")
DYNAMIC = (nn.Linear, nn.LSTM, nn.GRU)
METHOD = ("torch.ao.quantization.quantize_dynamic: Linear/LSTM/GRU int8 per-channel weights, dynamic int8 "
          "activations; Embedding 8-bit per-row weight-only")


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters(recurse=False))


def quantizable(model: nn.Module) -> tuple[list[str], list[str], float]:
    """(int8 layer names, fp32 layer names with weights, share of the parameters that become int8)."""
    int8, fp32, q, total = [], [], 0, 0
    for name, module in model.named_modules():
        n = _count(module)
        total += n
        if isinstance(module, (*DYNAMIC, nn.Embedding)):
            int8.append(name)
            q += n - sum(p.numel() for pn, p in module.named_parameters(recurse=False) if "bias" in pn)
        elif n:
            fp32.append(name)
    return int8, fp32, q / total if total else 0.0


def quantize(model: nn.Module, device: torch.device) -> tuple[nn.Module, dict]:
    """(int8 copy of ``model`` in eval mode, report {"int8": [...], "fp32": [...], "int8_param_fraction"})."""
    if device.type != "cpu":
        raise NotApplicable(f"PyTorch's dynamic int8 kernels (fbgemm/x86) run on the CPU only, not on {device}")
    int8, fp32, fraction = quantizable(model)
    from torch.ao.quantization import (
        float_qparams_weight_only_qconfig,
        per_channel_dynamic_qconfig,
        quantize_dynamic,
    )

    spec = {t: per_channel_dynamic_qconfig for t in DYNAMIC}
    spec[nn.Embedding] = float_qparams_weight_only_qconfig
    with warnings.catch_warnings():
        for message in SILENCED:
            warnings.filterwarnings("ignore", message=message)
        qmodel = quantize_dynamic(copy.deepcopy(model).float().eval(), spec, dtype=torch.qint8)
    return qmodel, {"int8": int8, "fp32": fp32, "int8_param_fraction": fraction, "method": METHOD}


def _qtensor_bytes(t: torch.Tensor) -> int:
    """int8 values plus the quantization parameters as the tensor holds them."""
    if not t.is_quantized:
        return t.numel() * t.element_size()
    n = t.int_repr().numel() * t.int_repr().element_size()
    if t.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric,
                       torch.per_channel_affine_float_qparams):
        s, z = t.q_per_channel_scales(), t.q_per_channel_zero_points()
        return n + s.numel() * s.element_size() + z.numel() * z.element_size()
    return n + 8  # one scale and one zero point


def _tensors_of(module: nn.Module) -> list[torch.Tensor]:
    """The tensors a module itself holds for inference, unpacking torch's packed int8 weights."""
    from torch.ao.nn.quantized import Embedding as QEmbedding
    from torch.ao.nn.quantized.dynamic import GRU as QGRU
    from torch.ao.nn.quantized.dynamic import LSTM as QLSTM
    from torch.ao.nn.quantized.dynamic import Linear as QLinear

    if isinstance(module, (QLSTM, QGRU)):
        wb = module._weight_bias()
        return [*wb["weight"].values(), *wb["bias"].values()]
    if isinstance(module, QLinear):
        return [t for t in module._packed_params._weight_bias() if t is not None]
    if isinstance(module, QEmbedding):
        return [module.weight()]
    return [*module.parameters(recurse=False), *module.buffers(recurse=False)]


def model_bytes(model: nn.Module) -> int:
    """Bytes of weights, biases, buffers and int8 scales/zero points (no serialisation overhead)."""
    with warnings.catch_warnings():
        for message in SILENCED:
            warnings.filterwarnings("ignore", message=message)
        return sum(_qtensor_bytes(t) for m in model.modules() for t in _tensors_of(m))
