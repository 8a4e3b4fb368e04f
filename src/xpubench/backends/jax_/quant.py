"""int8 inference for flax models: int8 weights with per-channel scales, applied by intercepting the
modules' calls (``flax.linen.intercept_methods``), so the workload modules stay unchanged.

What is quantized (``quantize_params``):
- every ``nn.Dense`` kernel (in, out): symmetric int8, one fp32 scale per output channel
  (``scale = max|w| / 127`` over the input axis); biases stay fp32. This covers the dense heads and the
  LSTM/GRU gate matmuls (``jax_layers`` builds each step from two Dense layers).
- every ``nn.Embed`` table (rows, features): symmetric int8, one fp32 scale per row (weight-only: a
  lookup has no matmul).
- every ``nn.Conv`` kernel (H, W, in, out): symmetric int8, one fp32 scale per output channel
  (``max|w| / 127`` over the other three axes); biases stay fp32.
- batch norm stays fp32 (it is applied to the convolution's fp32 output; not folded); the report says
  which layers are int8 and which share of the parameters that is.

How a quantized Dense runs (``mode``):
- ``"dynamic"`` (default; the same scheme as PyTorch's dynamic quantization): the activations are
  quantized on the fly, symmetric int8 with one scale per row (per sample, per time step), then an int8 x
  int8 -> int32 ``lax.dot_general(..., preferred_element_type=int32)``, then rescaled to fp32 by
  ``row scale x channel scale``. A quantized Conv does the same with one activation scale per sample
  (``max|x|`` over its height, width and channels: a per-tensor scale that does not depend on the
  other samples of the batch) and an int8 x int8 -> int32 ``lax.conv_general_dilated``.
- ``"weight_only"``: the int8 kernel is dequantized to fp32 inside the compiled function (XLA hoists it
  out of the recurrent loop) and the matmul or convolution runs in fp32: int8 storage, fp32 arithmetic.

The scales sit next to the kernels in the ``params`` collection (``kernel_scale``, ``embedding_scale``),
because flax's lifted ``scan`` (``nn.RNN``) only passes the ``params`` collection into the loop body.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util
from flax.linen import linear

from xpubench.devices.device import GPU, kind_of
from xpubench.errors import UserError

MODES = ("dynamic", "weight_only")
METHOD = {
    "dynamic": "int8 Dense/Conv kernels (per-channel scales) x dynamic int8 activations (per-row / "
               "per-sample scales), lax.dot_general / conv_general_dilated int8 -> int32; "
               "Embed int8 per-row weight-only",
    "weight_only": "int8 Dense/Conv kernels (per-channel scales) dequantized to fp32 in the compiled "
                   "function, fp32 matmuls and convolutions; Embed int8 per-row weight-only",
}
QMAX = 127.0


def quantize_rows(w: np.ndarray, axis: int | tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8, reducing over ``axis``: (int8 values, fp32 scales over the remaining axes)."""
    w = np.asarray(w, dtype=np.float32)
    amax = np.abs(w).max(axis=axis, keepdims=True)
    scale = np.where(amax > 0, amax / QMAX, 1.0).astype(np.float32)
    q = np.clip(np.rint(w / scale), -QMAX, QMAX).astype(np.int8)
    return q, scale.squeeze(axis)


def quantize_params(params) -> tuple[dict, dict]:
    """fp32 params -> (params with int8 Dense kernels and Embed tables plus their scales, report).

    report: {"int8": [layer paths], "fp32": [layer paths], "int8_param_fraction": share of parameters}.
    """
    flat = traverse_util.flatten_dict(jax.device_get(params))
    out, int8_layers, fp32_layers = {}, [], []
    quantized = total = 0
    for path, value in flat.items():
        value = np.asarray(value)
        total += value.size
        name, layer = path[-1], "/".join(path[:-1])
        if name == "kernel" and value.ndim >= 2:   # Dense (in, out), Conv (*window, in, out)
            out[path], out[(*path[:-1], "kernel_scale")] = quantize_rows(value, axis=tuple(range(value.ndim - 1)))
        elif name == "embedding" and value.ndim == 2:
            out[path], out[(*path[:-1], "embedding_scale")] = quantize_rows(value, axis=1)
        else:
            out[path] = value
            if name in ("kernel", "scale") and layer not in fp32_layers:
                fp32_layers.append(layer)
            continue
        quantized += value.size
        int8_layers.append(layer)
    report = {"int8": int8_layers, "fp32": [x for x in fp32_layers if x not in int8_layers],
              "int8_param_fraction": quantized / total if total else 0.0}
    return traverse_util.unflatten_dict(out), report


def platform_problem(kind, mode: str, qparams) -> str | None:
    """Why the int8 model cannot run on this kind of device (None when it can). XLA:GPU has no
    int8 x int8 -> int32 convolution: the cuDNN rewriter answers "Unimplemented: Integer convolutions
    for CuDNN must have this pattern ..." (jax-ml/jax#7637, open). Dense layers (int8 GEMMs) do run."""
    if kind_of(kind) is not GPU or mode != "dynamic":   # kind: a Kind or its name
        return None
    flat = traverse_util.flatten_dict(qparams)
    convs = ["/".join(path[:-1]) for path, v in flat.items() if path[-1] == "kernel" and np.ndim(v) > 2]
    if not convs:
        return None
    return (f"XLA:GPU has no int8 convolution (jax-ml/jax#7637: 'Unimplemented: Integer convolutions for "
            f"CuDNN'), and {len(convs)} layer(s) here are convolutions ({', '.join(convs[:3])}); int8 runs "
            "them on CPUs and TPUs, or on a GPU as fp32 arithmetic with options int8_mode = \"weight_only\"")


def _dense(module: nn.Dense, x, mode: str):
    wq = module.get_variable("params", "kernel")
    ws = module.get_variable("params", "kernel_scale")
    x = x.astype(jnp.float32)
    if mode == "weight_only":
        y = jnp.matmul(x, wq.astype(jnp.float32) * ws)
    else:
        xs = jnp.max(jnp.abs(x), axis=-1, keepdims=True) / QMAX
        xs = jnp.where(xs > 0, xs, 1.0)
        xq = jnp.clip(jnp.round(x / xs), -QMAX, QMAX).astype(jnp.int8)
        acc = jax.lax.dot_general(xq, wq, (((x.ndim - 1,), (0,)), ((), ())),
                                  preferred_element_type=jnp.int32)
        y = acc.astype(jnp.float32) * xs * ws
    if module.use_bias:
        y = y + module.get_variable("params", "bias")
    return y


def _embed(module: nn.Embed, ids):
    table = module.get_variable("params", "embedding")
    scale = module.get_variable("params", "embedding_scale")
    return table[ids].astype(jnp.float32) * scale[ids][..., None]


def _conv(module: nn.Conv, x, mode: str):
    """``nn.Conv.__call__`` for the plain case (shared weights, no mask, zero or no padding), int8."""
    if (type(module) is not nn.Conv or module.mask is not None or module.feature_group_count != 1
            or x.ndim != len(module.kernel_size) + 2):
        raise NotImplementedError(f"int8 {type(module).__name__} {module.name}: only plain nn.Conv layers "
                                  "(one batch axis, no mask, no feature groups) are quantized")
    padding = linear.canonicalize_padding(module.padding, len(module.kernel_size))
    if padding in ("CIRCULAR", "REFLECT", "CAUSAL"):
        raise NotImplementedError(f"int8 Conv {module.name}: padding {padding} is not supported")

    rank = len(module.kernel_size)

    def per_axis(v) -> tuple[int, ...]:    # flax's maybe_broadcast: None -> 1, int -> one per axis
        v = 1 if v is None else v
        return (v,) * rank if isinstance(v, int) else tuple(v)

    wq = module.get_variable("params", "kernel")
    ws = module.get_variable("params", "kernel_scale")
    x = x.astype(jnp.float32)
    conv = {"window_strides": per_axis(module.strides), "padding": padding,
            "lhs_dilation": per_axis(module.input_dilation), "rhs_dilation": per_axis(module.kernel_dilation),
            "dimension_numbers": linear._conv_dimension_numbers(x.shape)}
    if mode == "weight_only":
        y = jax.lax.conv_general_dilated(x, wq.astype(jnp.float32) * ws, **conv)
    else:
        axes = tuple(range(1, x.ndim))
        xs = jnp.max(jnp.abs(x), axis=axes, keepdims=True) / QMAX      # one scale per sample
        xs = jnp.where(xs > 0, xs, 1.0)
        xq = jnp.clip(jnp.round(x / xs), -QMAX, QMAX).astype(jnp.int8)
        acc = jax.lax.conv_general_dilated(xq, wq, preferred_element_type=jnp.int32, **conv)
        y = acc.astype(jnp.float32) * xs * ws
    if module.use_bias:
        y = y + module.get_variable("params", "bias")
    return y


def interceptor(mode: str):
    """A ``flax.linen.intercept_methods`` hook running int8 Dense/Conv/Embed layers; others pass through."""
    if mode not in MODES:
        raise UserError(f"unknown int8_mode {mode!r}; choose from {', '.join(MODES)}")

    def hook(next_fun, args, kwargs, context):
        module = context.module
        if context.method_name == "__call__" and (module.has_variable("params", "kernel_scale")
                                                  or module.has_variable("params", "embedding_scale")):
            if isinstance(module, nn.Dense):
                return _dense(module, args[0], mode)
            if isinstance(module, nn.Conv):
                return _conv(module, args[0], mode)
            if isinstance(module, nn.Embed):
                return _embed(module, args[0])
            # its fp32 code would read the int8 kernel as if it were fp32: refuse
            raise NotImplementedError(f"int8 {type(module).__name__} {module.name}: no int8 version")
        return next_fun(*args, **kwargs)
    return hook


def int8_apply(model, mode: str = "dynamic"):
    """apply(params, extra, x) -> output, with the int8 layers of ``quantize_params`` (inference only)."""
    hook = interceptor(mode)

    def apply(params, extra, x):
        with nn.intercept_methods(hook):
            return model.apply({"params": params, **extra}, x, train=False)
    return apply
