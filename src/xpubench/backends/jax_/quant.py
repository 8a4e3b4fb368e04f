"""int8 inference for flax models: int8 weights with per-channel scales, applied by intercepting the
modules' calls (``flax.linen.intercept_methods``), so the workload modules stay unchanged.

What is quantized (``quantize_params``):
- every ``nn.Dense`` kernel (in, out): symmetric int8, one fp32 scale per output channel
  (``scale = max|w| / 127`` over the input axis); biases stay fp32. This covers the dense heads and the
  LSTM/GRU gate matmuls (``jax_layers`` builds each step from two Dense layers).
- every ``nn.Embed`` table (rows, features): symmetric int8, one fp32 scale per row (weight-only: a
  lookup has no matmul).
- convolutions and batch norm stay fp32, as in the PyTorch path (int8 convolutions are not
  implemented); the report says which layers are int8 and which share of the parameters that is.

How a quantized Dense runs (``mode``):
- ``"dynamic"`` (default; the same scheme as PyTorch's dynamic quantization): the activations are
  quantized on the fly, symmetric int8 with one scale per row (per sample, per time step), then an int8 x
  int8 -> int32 ``lax.dot_general(..., preferred_element_type=int32)``, then rescaled to fp32 by
  ``row scale x channel scale``.
- ``"weight_only"``: the int8 kernel is dequantized to fp32 inside the compiled function (XLA hoists it
  out of the recurrent loop) and the matmul runs in fp32: int8 storage, fp32 arithmetic.

The scales sit next to the kernels in the ``params`` collection (``kernel_scale``, ``embedding_scale``),
because flax's lifted ``scan`` (``nn.RNN``) only passes the ``params`` collection into the loop body.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util

from xpubench.errors import UserError

MODES = ("dynamic", "weight_only")
METHOD = {
    "dynamic": "int8 Dense kernels (per-channel scales) x dynamic int8 activations (per-row scales), "
               "lax.dot_general int8 -> int32; Embed int8 per-row weight-only",
    "weight_only": "int8 Dense kernels (per-channel scales) dequantized to fp32 in the compiled function, "
                   "fp32 matmuls; Embed int8 per-row weight-only",
}
QMAX = 127.0


def quantize_rows(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 along ``axis`` (the reduced axis): (int8 values, fp32 scales of the other axis)."""
    w = np.asarray(w, dtype=np.float32)
    amax = np.abs(w).max(axis=axis)
    scale = np.where(amax > 0, amax / QMAX, 1.0).astype(np.float32)
    q = np.clip(np.rint(w / np.expand_dims(scale, axis)), -QMAX, QMAX).astype(np.int8)
    return q, scale


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
        if name == "kernel" and value.ndim == 2:
            out[path], out[(*path[:-1], "kernel_scale")] = quantize_rows(value, axis=0)
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


def interceptor(mode: str):
    """A ``flax.linen.intercept_methods`` hook running int8 Dense/Embed layers; others pass through."""
    if mode not in MODES:
        raise UserError(f"unknown int8_mode {mode!r}; choose from {', '.join(MODES)}")

    def hook(next_fun, args, kwargs, context):
        module = context.module
        if context.method_name == "__call__" and isinstance(module, (nn.Dense, nn.Embed)):
            name = "kernel" if isinstance(module, nn.Dense) else "embedding"
            if module.has_variable("params", f"{name}_scale"):
                return _dense(module, args[0], mode) if name == "kernel" else _embed(module, args[0])
        return next_fun(*args, **kwargs)
    return hook


def int8_apply(model, mode: str = "dynamic"):
    """apply(params, extra, x) -> output, with the int8 layers of ``quantize_params`` (inference only)."""
    hook = interceptor(mode)

    def apply(params, extra, x):
        with nn.intercept_methods(hook):
            return model.apply({"params": params, **extra}, x, train=False)
    return apply
