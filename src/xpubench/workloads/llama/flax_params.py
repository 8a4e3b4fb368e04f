"""The flax Llama's params (``flax_model.LlamaFlax``): drawn at random (``init_random``, transformers'
init), read from a checkpoint (``load_checkpoint``: q/k/v and gate/up fused by rows, as ``hf_tensors.target``
places them), quantised to int8 or int4 (``quantize_params``, the formats ``flax_model``'s docstring
describes), and counted as the architecture counts them (``n_params``)."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util

from xpubench.workloads.llama.checkpoint import Checkpoint
from xpubench.workloads.llama.costs import DEFAULT_INT4_GROUP, QUANTISED, compute_dtype
from xpubench.workloads.llama.flax_model import INIT_STD, LlamaFlax
from xpubench.workloads.llama.hf_tensors import target


def n_params(params) -> int:
    """Parameters as the architecture counts them (int8 values count, int4 values two per byte, their
    scales and zeros do not)."""
    flat = traverse_util.flatten_dict(params)
    return sum(int(np.prod(v.shape)) * (2 if v.dtype == jnp.uint8 else 1) for k, v in flat.items()
               if k[-1] not in ("scale", "zero") or k[-2].endswith("norm"))


@functools.partial(jax.jit, static_argnums=(1, 2))
def _quantize(w, axis: int, dtype):
    """Symmetric int8 reducing over ``axis`` (the input axis of a row: 1 for kernels and the embedding).
    Jitted, as ``_quantize_int4``: one small program per weight shape, not one per operation and shape."""
    w = w.astype(jnp.float32)
    scale = jnp.maximum(jnp.max(jnp.abs(w), axis=axis) / 127.0, 1e-12)
    q = jnp.clip(jnp.round(w / jnp.expand_dims(scale, axis)), -127, 127).astype(jnp.int8)
    return {"": q, "scale": scale.astype(dtype)}


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _quantize_int4(w, axis: int, dtype, group: int):
    """Asymmetric int4 in groups of ``group`` along ``axis`` (the input axis: torch_weights.quantize_groups'
    scheme, w ~= (q - 8)·scale + zero), two values per byte along it, the low nibble first."""
    w = jnp.moveaxis(w.astype(jnp.float32), axis, -1)
    g = w.reshape(*w.shape[:-1], -1, group)
    low, high = g.min(-1), g.max(-1)
    scale = jnp.maximum((high - low) / 15, 1e-6)
    q = jnp.clip(jnp.round((g - low[..., None]) / scale[..., None]), 0, 15).astype(jnp.uint8).reshape(w.shape)
    packed = q[..., 0::2] | (q[..., 1::2] << 4)
    back = functools.partial(jnp.moveaxis, source=-1, destination=axis)
    return {"": back(packed), "scale": back(scale).astype(dtype), "zero": back(low + 8 * scale).astype(dtype)}


def quantize_params(params, dtype, fmt: str = "int8", group: int = DEFAULT_INT4_GROUP) -> dict:
    """Float params -> int8 ones (a scale per row: per output channel, per embedding row) or int4 ones
    (groups along each row), leaf by leaf."""
    flat = traverse_util.flatten_dict(params)
    out = {}
    for key in list(flat):
        value = flat.pop(key)
        if key[-1] in ("kernel", "embedding"):
            parts = _quantize(value, 1, dtype) if fmt == "int8" else _quantize_int4(value, 1, dtype, group)
            out.update({(*key[:-1], name or key[-1]): part for name, part in parts.items()})
        else:
            out[key] = value
    return traverse_util.unflatten_dict(out)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _normal(key, shape: tuple[int, ...], dtype):
    return (jax.random.normal(key, shape, jnp.float32) * INIT_STD).astype(dtype)


def init_random(model: LlamaFlax, seed: int = 0):
    """Random params (transformers' init: N(0, 0.02) matrices, RMSNorm weights one) in the compute
    dtype on the default device, drawn leaf by leaf (one small program per shape, instead of
    compiling the whole model's ``init``: half the time for smollm-135m on the CPU); int8 quantises them."""
    float_model = dataclasses.replace(model, fmt=compute_dtype(model.fmt, model.int8_compute))
    shapes = jax.eval_shape(float_model.init, jax.random.key(0), jnp.zeros((1, 1), jnp.int32))["params"]
    leaves, tree = jax.tree.flatten(shapes)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    params = jax.tree.unflatten(tree, [_normal(k, s.shape, s.dtype) if len(s.shape) == 2 else jnp.ones(s.shape, s.dtype)
                                       for k, s in zip(keys, leaves)])
    if model.fmt in QUANTISED:
        params = quantize_params(params, model.dtype, model.fmt, model.group)
    return params


def load_checkpoint(model: LlamaFlax, ckpt: Checkpoint):
    """The checkpoint's tensors as this model's params (host numpy arrays; the caller puts them on a
    device): q/k/v and gate/up fused (rows stacked), int8 / int4 quantised."""
    if dataclasses.replace(ckpt.config, name=model.cfg.name) != model.cfg:
        raise ValueError("the model was built for another config than the checkpoint's")
    cfg, dtype = model.cfg, model.dtype
    float_model = dataclasses.replace(model, fmt=compute_dtype(model.fmt, model.int8_compute))
    shapes = jax.eval_shape(float_model.init, jax.random.key(0), jnp.zeros((1, 1), jnp.int32))["params"]
    flat_shapes = traverse_util.flatten_dict(shapes)
    float_dtype = np.dtype(jnp.dtype(dtype))
    out = {k: np.empty(s.shape, float_dtype) for k, s in flat_shapes.items()}
    with jax.default_device(jax.devices("cpu")[0]):
        for name, tensor in ckpt.tensors("flax"):
            layer, slot, row = target(cfg, name)
            prefix = () if layer is None else (f"layers_{layer}",)
            value = np.asarray(tensor).astype(float_dtype)
            if slot in ("embed",):
                out[("embed", "embedding")][...] = value
            elif slot in ("norm", "attn_norm", "mlp_norm"):
                out[(*prefix, slot, "scale")][...] = value
            else:
                out[(*prefix, slot, "kernel")][row:row + value.shape[0]] = value
    params = traverse_util.unflatten_dict(out)
    return quantize_params(params, dtype, model.fmt, model.group) if model.fmt in QUANTISED else params
