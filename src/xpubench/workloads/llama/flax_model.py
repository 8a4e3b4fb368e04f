"""The Llama decoder in JAX/flax (linen), the same architecture, parameter count and numerics as
``torch_model`` (and transformers' ``LlamaForCausalLM``), with a fixed-size KV cache.

Parameters (flax layout, kernels (in, out)): ``embed/embedding`` (V, C); ``layers_<i>/{attn_norm/scale,
qkv/kernel (C, (H + 2·KV)·D), o/kernel, mlp_norm/scale, gate_up/kernel (C, 2I), down/kernel}``;
``norm/scale``; ``head/kernel`` (C, V) when untied. int8: every kernel and the embedding are int8 with a
``scale`` beside them (one per output channel / per embedding row, in the compute dtype), dequantised
inside the compiled function: ``(x @ w.astype(dtype)) * scale``. XLA on the CPU converts the int8
weight to the compute dtype in memory before its matmul (no fused int8 kernel): the weights are
stored and read from memory at 1 byte, then written and read again at 2.

Generation (``extend(idx, kv, pos)`` -> (logits of the last position (B, V), kv)), the contract of
``backends/jax_/generate.py``: kv a tuple over layers of (k, v), each (B, T_max, KV, D), of fixed size;
t > 1 tokens is the prefill (pos must be 0: causal attention over idx, keys and values written at
0..t-1); t = 1 a decode step at ``pos`` (an int32 scalar, may be traced): written at ``pos``, attends to
0..pos (``key_value_seq_lengths``), so every step has the same shapes and one compiled program serves
them all. ``jax.nn.dot_product_attention`` takes the KV heads as they are (grouped-query attention).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util

from xpubench.workloads.llama.checkpoint import Checkpoint, target
from xpubench.workloads.llama.config import LlamaConfig, rope_inv_freq
from xpubench.workloads.llama.costs import DEFAULT_INT8_COMPUTE, compute_dtype

DTYPES = {"fp32": jnp.float32, "bf16": jnp.bfloat16, "fp16": jnp.float16}
INIT_STD = 0.02
NORMAL = nn.initializers.normal(INIT_STD)


class Proj(nn.Module):
    features: int
    dtype: Any
    int8: bool = False

    @nn.compact
    def __call__(self, x):
        shape = (x.shape[-1], self.features)
        if self.int8:
            w = self.param("kernel", nn.initializers.zeros, shape, jnp.int8)
            return (x @ w.astype(x.dtype)) * self.param("scale", nn.initializers.ones, (self.features,), self.dtype)
        return x @ self.param("kernel", NORMAL, shape, self.dtype)


class Embed(nn.Module):
    """The token table (V, C): ``__call__`` looks rows up, ``attend`` is the tied head x @ table^T."""

    rows: int
    features: int
    dtype: Any
    int8: bool = False

    def setup(self) -> None:
        shape = (self.rows, self.features)
        if self.int8:
            self.embedding = self.param("embedding", nn.initializers.zeros, shape, jnp.int8)
            self.scale = self.param("scale", nn.initializers.ones, (self.rows,), self.dtype)
        else:
            self.embedding = self.param("embedding", NORMAL, shape, self.dtype)

    def __call__(self, idx):
        x = jnp.take(self.embedding, idx, axis=0).astype(self.dtype)
        return x * jnp.take(self.scale, idx, axis=0)[..., None] if self.int8 else x

    def attend(self, x):
        if self.int8:
            return (x @ self.embedding.astype(x.dtype).T) * self.scale
        return x @ self.embedding.T


class RMSNorm(nn.Module):
    eps: float
    dtype: Any

    @nn.compact
    def __call__(self, x):
        w = self.param("scale", nn.initializers.ones, (x.shape[-1],), self.dtype)
        x32 = x.astype(jnp.float32)
        y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
        return w * y.astype(x.dtype)


def rope(x, cos, sin):
    """rotate_half layout: x (B, t, heads, D), cos/sin (t, 1, D/2)."""
    x1, x2 = jnp.split(x, 2, axis=-1)
    return jnp.concatenate((x1 * cos - x2 * sin, x2 * cos + x1 * sin), axis=-1)


class Block(nn.Module):
    cfg: LlamaConfig
    dtype: Any
    int8: bool

    def setup(self) -> None:
        cfg = self.cfg
        self.attn_norm = RMSNorm(cfg.rms_norm_eps, self.dtype)
        self.qkv = Proj(cfg.q_size + 2 * cfg.kv_size, self.dtype, self.int8)
        self.o = Proj(cfg.hidden_size, self.dtype, self.int8)
        self.mlp_norm = RMSNorm(cfg.rms_norm_eps, self.dtype)
        self.gate_up = Proj(2 * cfg.intermediate_size, self.dtype, self.int8)
        self.down = Proj(cfg.hidden_size, self.dtype, self.int8)

    def __call__(self, x, cos, sin, kv=None, pos=0):
        b, t, _ = x.shape
        h, g, d = self.cfg.n_heads, self.cfg.n_kv_heads, self.cfg.head_dim
        qkv = self.qkv(self.attn_norm(x)).reshape(b, t, h + 2 * g, d)
        qk = rope(qkv[:, :, :h + g], cos, sin)
        q, k, v = qk[:, :, :h], qk[:, :, h:], qkv[:, :, h + g:]
        lengths = None
        if kv is not None:
            k_cache = jax.lax.dynamic_update_slice_in_dim(kv[0], k.astype(kv[0].dtype), pos, axis=1)
            v_cache = jax.lax.dynamic_update_slice_in_dim(kv[1], v.astype(kv[1].dtype), pos, axis=1)
            kv = (k_cache, v_cache)
            if t == 1:
                k, v = k_cache, v_cache
                lengths = jnp.full((b,), pos + 1, dtype=jnp.int32)
        y = jax.nn.dot_product_attention(q, k, v, is_causal=t > 1, key_value_seq_lengths=lengths)
        x = x + self.o(y.reshape(b, t, h * d))
        gate, up = jnp.split(self.gate_up(self.mlp_norm(x)), 2, axis=-1)
        return x + self.down(jax.nn.silu(gate) * up), kv


INT8_METHOD = ("int8 weights, per-output-channel scales; dequantised in the compiled step: "
               "(x @ w.astype({dtype})) * scale")


class LlamaFlax(nn.Module):
    """The model (module docstring); ``__call__(idx)`` -> (B, t, V) logits without a cache."""

    cfg: LlamaConfig
    fmt: str = "fp32"
    int8_compute: str = DEFAULT_INT8_COMPUTE

    @property
    def dtype(self):
        return DTYPES[compute_dtype(self.fmt, self.int8_compute)]

    @property
    def context(self) -> int:
        """Positions the model can attend to (generation's protocol, backends/jax_/generate.py)."""
        return self.cfg.max_positions

    @property
    def compute_precision(self) -> str:
        """The precision its programs compute in: the format's, for int8 weights their compute dtype's."""
        return compute_dtype(self.fmt, self.int8_compute)

    @nn.nowrap
    def new_kv(self, batch: int, positions: int) -> tuple:
        """Zeroed keys and values: a tuple over layers of (k, v), each (B, positions, KV, D) in the compute dtype."""
        shape = (batch, positions, self.cfg.n_kv_heads, self.cfg.head_dim)
        return tuple((jnp.zeros(shape, self.dtype), jnp.zeros(shape, self.dtype)) for _ in range(self.cfg.n_layers))

    @nn.nowrap
    def generation_facts(self) -> dict:
        """What a generation result records of the model: its weights' format and how int8 is computed."""
        method = INT8_METHOD.format(dtype=self.compute_precision) if self.fmt == "int8" else None
        return {"weight_format": self.fmt, "int8_method": method}

    def setup(self) -> None:
        int8 = self.fmt == "int8"
        self.embed = Embed(self.cfg.vocab_size, self.cfg.hidden_size, self.dtype, int8)
        self.layers = [Block(self.cfg, self.dtype, int8) for _ in range(self.cfg.n_layers)]
        self.norm = RMSNorm(self.cfg.rms_norm_eps, self.dtype)
        if not self.cfg.tie_embeddings:
            self.head = Proj(self.cfg.vocab_size, self.dtype, int8)
        self.inv_freq = np.asarray(rope_inv_freq(self.cfg), dtype=np.float32)

    def _trunk(self, idx, kv, pos):
        t = idx.shape[1]
        x = self.embed(idx)
        freqs = ((pos + jnp.arange(t, dtype=jnp.int32)).astype(jnp.float32)[:, None] * self.inv_freq)[:, None, :]
        cos, sin = jnp.cos(freqs).astype(self.dtype), jnp.sin(freqs).astype(self.dtype)
        new_kv = []
        for i, block in enumerate(self.layers):
            x, layer_kv = block(x, cos, sin, None if kv is None else kv[i], pos)
            new_kv.append(layer_kv)
        return x, tuple(new_kv)

    def _logits(self, x):
        x = self.norm(x)
        if not self.cfg.tie_embeddings:
            return self.head(x)
        return self.embed.attend(x)

    def __call__(self, idx, train: bool = False):
        x, _ = self._trunk(idx, None, 0)
        return self._logits(x)

    def extend(self, idx, kv, pos):
        if idx.shape[1] > 1 and not (isinstance(pos, int) and pos == 0):
            raise ValueError("a cached call of several tokens must start at position 0 (prefill)")
        x, kv = self._trunk(idx, kv, pos)
        return self._logits(x[:, -1]), kv


def n_params(params) -> int:
    """Parameters as the architecture counts them (int8 values count, their scales do not)."""
    flat = traverse_util.flatten_dict(params)
    return sum(int(np.prod(v.shape)) for k, v in flat.items() if k[-1] != "scale" or k[-2].endswith("norm"))


def _quantize(w, axis: int, dtype):
    """Symmetric int8 reducing over ``axis`` (a kernel's input axis, an embedding's feature axis)."""
    w = w.astype(jnp.float32)
    scale = jnp.maximum(jnp.max(jnp.abs(w), axis=axis) / 127.0, 1e-12)
    q = jnp.clip(jnp.round(w / jnp.expand_dims(scale, axis)), -127, 127).astype(jnp.int8)
    return q, scale.astype(dtype)


def quantize_params(params, dtype) -> dict:
    """Float params -> int8 ones (kernels per output channel, the embedding per row), leaf by leaf."""
    flat = traverse_util.flatten_dict(params)
    out = {}
    for key in list(flat):
        value = flat.pop(key)
        if key[-1] in ("kernel", "embedding"):
            out[key], out[(*key[:-1], "scale")] = _quantize(value, 0 if key[-1] == "kernel" else 1, dtype)
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
    if model.fmt == "int8":
        params = quantize_params(params, model.dtype)
    return params


def load_checkpoint(model: LlamaFlax, ckpt: Checkpoint):
    """The checkpoint's tensors as this model's params (host numpy arrays; the caller puts them on a
    device): kernels transposed to (in, out), q/k/v and gate/up fused, int8 quantised."""
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
                out[(*prefix, slot, "kernel")][:, row:row + value.shape[0]] = value.T
    params = traverse_util.unflatten_dict(out)
    return quantize_params(params, dtype) if model.fmt == "int8" else params
