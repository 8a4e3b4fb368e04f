"""int8 inference for PyTorch models with PyTorch's own quantization (``torch.ao.quantization``).

Two schemes, chosen by the model:

**Models with convolutions** (``mnist_cnn``, ``fashion_cnn``, ``cifar10_resnet``): *static* int8 with
FX graph mode quantization (``prepare_fx`` / ``convert_fx``, ``get_default_qconfig_mapping("x86")``) on
a copy of the model:
- the model is traced (``torch.fx``), batch norm is folded into the preceding convolution, and
  conv + ReLU, linear + ReLU and add + ReLU are fused;
- convolution and linear weights: int8, one scale per output channel (symmetric); biases stay fp32;
- activations: uint8 with one scale and zero point per tensor, fixed ahead of time by *calibration*:
  observers (histogram, 7-bit range as fbgemm/x86 want) watch the fp32 model run on a few batches of
  the **training** inputs (never the evaluation inputs), then ``convert_fx`` freezes the scales;
- the network then runs int8 end to end on the x86 quantized engine (fbgemm / oneDNN kernels):
  quantize the input once, int8 convolutions, pooling, residual adds, linears, dequantize the logits.
  Ops without a quantized kernel (``F.pad`` before mnist_cnn's even-kernel convolutions, the
  shortcut's subsample and channel padding in ResNet-20) run in fp32 between a dequantize and a quantize.
``torch.ao.quantization.quantize_fx`` is deprecated (torch 2.13 warns that it moves to torchao, whose
PT2E flow needs ``torch.export`` and is not installed here) but works; it is the framework's own
static-quantization tooling in this release.

**Other models** (LSTM / GRU / dense / embedding): eager-mode *dynamic* quantization,
``torch.ao.quantization.quantize_dynamic``:
- ``nn.Linear``, ``nn.LSTM``, ``nn.GRU`` -> their dynamic int8 versions: weights int8 with one scale
  per output channel (``per_channel_dynamic_qconfig``); at run time each input is quantized to 8 bits
  with a scale computed from that tensor, the matmul runs int8 x int8 -> int32 (fbgemm / x86 kernels),
  the result is rescaled to fp32, biases stay fp32;
- ``nn.Embedding`` -> a weight-only 8-bit table with one scale and offset per row
  (``float_qparams_weight_only_qconfig``); a lookup has no matmul to quantize.
(Static quantization needs fixed activation ranges, which recurrent state does not have; the dynamic
scheme is torch's own choice for LSTMs.) These kernels run on the CPU only.

torch 2.13 still ships ``torch.ao.quantization`` but warns that it is deprecated in favour of torchao.
Those warnings (the deprecation notice, "quantized tensor creation functions are deprecated", and the
observers' "reduce_range will be deprecated" raised by torch's own default x86 qconfig), and only
those, are silenced by message while the model is converted.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from xpubench.harness.inference import NotApplicable

SILENCED = (r"torch\.ao\.quantization is deprecated", r".*quantized tensor creation functions.*deprecated",
            r"Please use quant_min and quant_max to specify the range for observers")
DYNAMIC = (nn.Linear, nn.LSTM, nn.GRU)
CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
STATIC = (*CONV, nn.Linear)
FOLDED = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
ENGINES = ("x86", "fbgemm", "onednn")
CALIBRATION_SAMPLES = 1024   # training inputs the static observers see (the first ones, in order)
METHOD = ("torch.ao.quantization.quantize_dynamic: Linear/LSTM/GRU int8 per-channel weights, dynamic int8 "
          "activations; Embedding 8-bit per-row weight-only")
STATIC_METHOD = ("torch.ao.quantization.quantize_fx static ({engine}): conv/linear int8 per-channel weights, "
                 "uint8 per-tensor activations calibrated on {n} training samples, batch norm folded")


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters(recurse=False))


def _weights(module: nn.Module) -> int:
    return sum(p.numel() for pn, p in module.named_parameters(recurse=False) if "bias" not in pn)


def is_static(model: nn.Module) -> bool:
    """Models with convolutions get static (calibrated) int8; the others dynamic int8."""
    return any(isinstance(m, CONV) for m in model.modules())


def quantizable(model: nn.Module) -> tuple[list[str], list[str], float]:
    """(int8 layer names, fp32 layer names with weights, share of the parameters that become int8).

    Static scheme: convolutions and linears become int8; batch norm is folded into the convolution
    before it (its scale into the int8 weights, its shift into the fp32 bias), so it is neither."""
    static = is_static(model)
    int8, fp32, q, total = [], [], 0, 0
    for name, module in model.named_modules():
        n = _count(module)
        total += n
        if isinstance(module, STATIC if static else (*DYNAMIC, nn.Embedding)):
            int8.append(name)
            q += _weights(module)
        elif static and isinstance(module, FOLDED):
            q += _weights(module)     # the BN scale, folded into the int8 conv weights
        elif n:
            fp32.append(name)
    return int8, fp32, q / total if total else 0.0


def quantize(model: nn.Module, device: torch.device, calibration: torch.Tensor | None = None,
             batch: int = 256) -> tuple[nn.Module, dict]:
    """(int8 copy of ``model`` in eval mode, report {"int8": [...], "fp32": [...], "int8_param_fraction",
    "method"}). Models with convolutions need ``calibration``: training inputs, of which the first
    ``CALIBRATION_SAMPLES`` are run through the observed model in batches of ``batch``."""
    if device.type != "cpu":
        raise NotApplicable(f"PyTorch's int8 kernels (fbgemm/x86) run on the CPU only, not on {device}")
    int8, fp32, fraction = quantizable(model)
    report = {"int8": int8, "fp32": fp32, "int8_param_fraction": fraction}
    if is_static(model):
        if calibration is None or len(calibration) == 0:
            raise ValueError("static int8 needs calibration inputs (training samples)")
        qmodel, n = quantize_static(model, calibration, batch)
        report["method"] = STATIC_METHOD.format(engine=torch.backends.quantized.engine, n=n)
        report["calibration_samples"] = n
        return qmodel, report
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
    report["method"] = METHOD
    return qmodel, report


def check_engine(model: nn.Module) -> None:
    """Static int8 uses the x86 qconfig and kernels: refuse other quantized engines (qnnpack on ARM)."""
    engine = torch.backends.quantized.engine
    if is_static(model) and engine not in ENGINES:
        raise NotApplicable(f"static int8 needs an x86 quantized engine ({', '.join(ENGINES)}), not {engine}")


def quantize_static(model: nn.Module, calibration: torch.Tensor, batch: int) -> tuple[nn.Module, int]:
    """FX graph mode static int8 of a copy of ``model``: (converted GraphModule, calibration samples)."""
    check_engine(model)
    engine = torch.backends.quantized.engine
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    calib = calibration[:CALIBRATION_SAMPLES].float().cpu()
    with warnings.catch_warnings():
        for message in SILENCED:
            warnings.filterwarnings("ignore", message=message)
        float_model = copy.deepcopy(model).float().eval()
        observed = prepare_fx(float_model, get_default_qconfig_mapping(engine), example_inputs=(calib[:1],))
        with torch.inference_mode():
            for i in range(0, len(calib), batch):
                observed(calib[i:i + batch])
        return convert_fx(observed).eval(), len(calib)


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
    from torch.ao.nn.quantized import Linear as QStaticLinear
    from torch.ao.nn.quantized.dynamic import GRU as QGRU
    from torch.ao.nn.quantized.dynamic import LSTM as QLSTM
    from torch.ao.nn.quantized.dynamic import Linear as QLinear
    from torch.ao.nn.quantized.modules.conv import _ConvNd as QConv

    if isinstance(module, (QLSTM, QGRU)):
        wb = module._weight_bias()
        return [*wb["weight"].values(), *wb["bias"].values()]
    if isinstance(module, QLinear):   # dynamic: no output scale
        return [t for t in module._packed_params._weight_bias() if t is not None]
    if isinstance(module, (QStaticLinear, QConv)):
        # static: + the output's scale and zero point (fp32 and int64, as its state_dict holds them)
        wb = module._packed_params._weight_bias() if isinstance(module, QStaticLinear) else module._weight_bias()
        return [*(t for t in wb if t is not None), torch.tensor(module.scale, dtype=torch.float32),
                torch.tensor(module.zero_point)]
    if isinstance(module, QEmbedding):
        return [module.weight()]
    return [*module.parameters(recurse=False), *module.buffers(recurse=False)]


def model_bytes(model: nn.Module) -> int:
    """Bytes of weights, biases, buffers and int8 scales/zero points (no serialisation overhead)."""
    with warnings.catch_warnings():
        for message in SILENCED:
            warnings.filterwarnings("ignore", message=message)
        return sum(_qtensor_bytes(t) for m in model.modules() for t in _tensors_of(m))
