"""The Llama decoder in JAX/flax (linen), the same architecture, parameter count and numerics as
``torch_model`` (and transformers' ``LlamaForCausalLM``), with a fixed-size KV cache.

Parameters (the projections' weights one row per output, (out, in), as torch and the checkpoints store
them): ``embed/embedding`` (V, C); ``layers_<i>/{attn_norm/scale, qkv/kernel ((H + 2·KV)·D, C), o/kernel,
mlp_norm/scale, gate_up/kernel (2I, C), down/kernel (C, I)}``; ``norm/scale``; ``head/kernel`` (V, C) when
untied. int8: every kernel and the embedding are int8 with a ``scale`` per row (per output channel, per
embedding row) in the compute dtype; int4: two values per byte along a row (the input axis) with a
``scale`` and a ``zero`` per group of ``group`` (torch_model's scheme). Every dot accumulates in float32.
``flax_params`` draws them at random, reads them from a checkpoint and quantises them.

On XLA:CPU the weights of bf16, fp16, int8 and int4 models become fp32 inside the compiled function
(``dequant``) and the dot contracts each weight row with the input: why (the optimized HLO of a decode
step, ``jax.jit(f).lower(...).compile().as_text()``, jax 0.10, AVX2 CPU): XLA:CPU has no bf16 dot, so it
converts a bf16 dot's operands to f32 whatever the model asks (``preferred_element_type``, oneDNN/XNNPACK
flags). With (in, out) kernels that conversion is a ``wrapped_convert`` fusion writing the whole weight
as f32 into a buffer allocated (and page-faulted: 4 KiB pages, zeroed by the kernel) afresh in every
call, which a 135M-parameter decode step paid 30 times per token: bf16 decoded at a fifth of fp32's
tokens/s. With (out, in) rows and the conversion written as ``w.astype(float32)`` beside a dot over the
rows' axis, XLA:CPU fuses convert and dot into one library fusion at batch 1, which reads the 2-byte
(or 1-byte) weights once: a bf16 matrix-vector product then takes ~0.6x the time of fp32's (measured
per projection of smollm-135m, one core). The arithmetic is the one XLA did before (bf16 values, fp32
products and sums); on accelerators the operands stay in the compute dtype (bf16 tensor cores).

Generation (``extend(idx, kv, pos)`` -> (logits of the last position (B, V), kv)), the contract of
``backends/jax_/generate.py``: kv a tuple over layers of (k, v), each (B·KV, T_max, D), of fixed size
(``flax_attention``); t > 1 tokens is the prefill (``jax.nn.dot_product_attention``, causal, keys and values
written at pos .. pos + t - 1); t = 1 a decode step at ``pos`` (an int32 scalar, may be traced): written at
``pos``, attends to 0..pos (``flax_attention.decode``, the later positions masked), so every step has the
same shapes and one compiled program serves them all.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from xpubench.workloads.llama import flax_attention as attention
from xpubench.workloads.llama.config import LlamaConfig, rope_inv_freq
from xpubench.workloads.llama.costs import DEFAULT_INT4_GROUP, DEFAULT_INT8_COMPUTE, compute_dtype, param_count

DTYPES = {"fp32": jnp.float32, "bf16": jnp.bfloat16, "fp16": jnp.float16}
INIT_STD = 0.02
NORMAL = nn.initializers.normal(INIT_STD)


def matmul(x, w, dtype, to=None, computed=False):
    """x @ w.T (w (N, K), one row per output, or its dequantised form) accumulated in float32, the result in
    ``dtype``; ``to``: the dtype both operands become first inside the compiled function (None: w's; fp32
    on XLA:CPU, module docstring). Written as ``rows @ w.T`` on x flattened to (rows, K): for one row that
    is the form XLA:CPU fuses with the weight's conversion into one loop (a dot_general contracting w's
    rows, or a 3-D one, gets the conversion in a buffer of its own). One row of float32 weights, nothing to
    convert, is ``w @ row``: a matrix-vector product XLA:CPU runs as a dot of its own, where ``rows @ w.T`` became
    a loop fusion that recomputed the row's producer (the RMS norm, the embedding lookup) for every weight row:
    1.56x faster fp32 decode steps on an AMX Xeon (docs/workloads.md). ``computed``: w is made in the step
    (dequantised int4), which such a dot would have written out whole first (int4 decoded at 3 tok/s)."""
    to = to or w.dtype
    rows = x.reshape(-1, x.shape[-1]).astype(to)
    if rows.shape[0] == 1 and w.dtype == to == jnp.float32 and not computed:
        y = jnp.matmul(w, rows[0], preferred_element_type=jnp.float32)[None]
    else:
        y = jnp.matmul(rows, w.astype(to).T, preferred_element_type=jnp.float32)
    return y.reshape(*x.shape[:-1], w.shape[0]).astype(dtype)


def unpack_int4(packed, axis: int):
    """Values 0..15 from two per byte along ``axis`` (the low nibble first): the inverse of ``flax_params``' packing."""
    both = jnp.stack((packed & 15, packed >> 4), axis=axis + 1)
    return both.reshape(*packed.shape[:axis], -1, *packed.shape[axis + 1:])


def dequant_int4(packed, scale, zero, axis: int, group: int, dtype):
    """(q - 8)·scale + zero, the scales and zeros repeated over their groups along ``axis``."""
    q = unpack_int4(packed, axis).astype(dtype)
    return ((q - 8) * jnp.repeat(scale.astype(dtype), group, axis=axis)
            + jnp.repeat(zero.astype(dtype), group, axis=axis))


class Proj(nn.Module):
    """x @ W.T with W (out, in): ``features`` rows of the input's width."""

    features: int
    dtype: Any
    fmt: str = "fp32"
    dequant: Any = None        # the dtype weights become before the dot (None: ``dtype``)
    group: int = 32

    @nn.compact
    def __call__(self, x):
        n, k = self.features, x.shape[-1]
        to = self.dequant or self.dtype
        if self.fmt == "int8":
            w = self.param("kernel", nn.initializers.zeros, (n, k), jnp.int8)
            return matmul(x, w, self.dtype, to) * self.param("scale", nn.initializers.ones, (n,), self.dtype)
        if self.fmt == "int4":
            w = self.param("kernel", nn.initializers.zeros, (n, k // 2), jnp.uint8)
            scale = self.param("scale", nn.initializers.ones, (n, k // self.group), self.dtype)
            zero = self.param("zero", nn.initializers.zeros, (n, k // self.group), self.dtype)
            return matmul(x, dequant_int4(w, scale, zero, 1, self.group, to), self.dtype, computed=True)
        return matmul(x, self.param("kernel", NORMAL, (n, k), self.dtype), self.dtype, to)


class Embed(nn.Module):
    """The token table (V, C): ``__call__`` looks rows up, ``attend`` is the tied head x @ table^T."""

    rows: int
    features: int
    dtype: Any
    fmt: str = "fp32"
    dequant: Any = None
    group: int = 32

    def setup(self) -> None:
        shape = (self.rows, self.features)
        if self.fmt == "int8":
            self.embedding = self.param("embedding", nn.initializers.zeros, shape, jnp.int8)
            self.scale = self.param("scale", nn.initializers.ones, (self.rows,), self.dtype)
        elif self.fmt == "int4":
            groups = (self.rows, self.features // self.group)
            self.embedding = self.param("embedding", nn.initializers.zeros, (self.rows, self.features // 2), jnp.uint8)
            self.scale = self.param("scale", nn.initializers.ones, groups, self.dtype)
            self.zero = self.param("zero", nn.initializers.zeros, groups, self.dtype)
        else:
            self.embedding = self.param("embedding", NORMAL, shape, self.dtype)

    def __call__(self, idx):
        rows = jnp.take(self.embedding, idx, axis=0)
        if self.fmt == "int4":
            return dequant_int4(rows, jnp.take(self.scale, idx, axis=0), jnp.take(self.zero, idx, axis=0),
                                rows.ndim - 1, self.group, self.dtype)
        x = rows.astype(self.dtype)
        return x * jnp.take(self.scale, idx, axis=0)[..., None] if self.fmt == "int8" else x

    def attend(self, x):
        to = self.dequant or self.dtype
        if self.fmt == "int8":
            return matmul(x, self.embedding, self.dtype, to) * self.scale
        if self.fmt == "int4":
            return matmul(x, dequant_int4(self.embedding, self.scale, self.zero, 1, self.group, to), self.dtype,
                          computed=True)
        return matmul(x, self.embedding, self.dtype, to)


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
    quant: dict

    def setup(self) -> None:
        cfg, q = self.cfg, self.quant
        self.attn_norm = RMSNorm(cfg.rms_norm_eps, self.dtype)
        self.qkv = Proj(cfg.q_size + 2 * cfg.kv_size, self.dtype, **q)
        self.o = Proj(cfg.hidden_size, self.dtype, **q)
        self.mlp_norm = RMSNorm(cfg.rms_norm_eps, self.dtype)
        self.gate_up = Proj(2 * cfg.intermediate_size, self.dtype, **q)
        self.down = Proj(cfg.hidden_size, self.dtype, **q)

    def __call__(self, x, cos, sin, kv=None, pos=0):
        b, t, _ = x.shape
        h, g, d = self.cfg.n_heads, self.cfg.n_kv_heads, self.cfg.head_dim
        qkv = self.qkv(self.attn_norm(x)).reshape(b, t, h + 2 * g, d)
        qk = rope(qkv[:, :, :h + g], cos, sin)
        q, k, v = qk[:, :, :h], qk[:, :, h:], qkv[:, :, h + g:]
        mask, y = None, None
        if kv is not None:
            kv = (attention.write(kv[0], k, pos), attention.write(kv[1], v, pos))
            if t == 1:
                y = attention.decode(q, kv[0], kv[1], pos)
            elif pos:   # a prefill after ``pos`` cached positions (--depth): token i attends to 0 .. pos + i
                k, v = attention.cached(kv[0], b, pos + t), attention.cached(kv[1], b, pos + t)
                mask = (jnp.arange(pos + t)[None, :] <= pos + jnp.arange(t)[:, None])[None, None]
        if y is None:
            y = jax.nn.dot_product_attention(q, k, v, is_causal=t > 1 and mask is None, mask=mask)
        x = x + self.o(y.reshape(b, t, h * d))
        gate, up = jnp.split(self.gate_up(self.mlp_norm(x)), 2, axis=-1)
        return x + self.down(jax.nn.silu(gate) * up), kv


INT8_METHOD = ("int8 weights, per-output-channel scales; dequantised in the compiled step: "
               "(x @ w.astype({to}).T) * scale, accumulated in float32")
INT4_METHOD = ("int4 weights two per byte, a scale and a zero per {group}; unpacked and dequantised to {to} in the "
               "compiled step, then x @ w.T accumulated in float32")


class LlamaFlax(nn.Module):
    """The model (module docstring); ``__call__(idx)`` -> (B, t, V) logits without a cache."""

    cfg: LlamaConfig
    fmt: str = "fp32"
    int8_compute: str = DEFAULT_INT8_COMPUTE
    dequant: str | None = None     # the dtype weights become before their dot (None: the compute dtype);
    #                                "fp32" on XLA:CPU, which has no bf16 dot (module docstring)
    group: int = DEFAULT_INT4_GROUP

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
        """Zeroed keys and values: a tuple over layers of (k, v), each (B·KV, positions, D) in the compute dtype
        (``flax_attention``)."""
        shape = (batch * self.cfg.n_kv_heads, positions, self.cfg.head_dim)
        return tuple((jnp.zeros(shape, self.dtype), jnp.zeros(shape, self.dtype)) for _ in range(self.cfg.n_layers))

    @nn.nowrap
    def generation_facts(self) -> dict:
        """What a generation result records of the model: its weights' format, how int8 / int4 is computed,
        its parameter count."""
        to = self.dequant or self.compute_precision
        method = {"int8": INT8_METHOD, "int4": INT4_METHOD}.get(self.fmt, "").format(to=to, group=self.group)
        return {"weight_format": self.fmt, "int8_method": method or None, "params": param_count(self.cfg)}

    def setup(self) -> None:
        quant = {"fmt": self.fmt, "dequant": DTYPES[self.dequant] if self.dequant else None, "group": self.group}
        self.embed = Embed(self.cfg.vocab_size, self.cfg.hidden_size, self.dtype, **quant)
        self.layers = [Block(self.cfg, self.dtype, quant) for _ in range(self.cfg.n_layers)]
        self.norm = RMSNorm(self.cfg.rms_norm_eps, self.dtype)
        if not self.cfg.tie_embeddings:
            self.head = Proj(self.cfg.vocab_size, self.dtype, **quant)
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
        if idx.shape[1] > 1 and not isinstance(pos, int):
            raise ValueError("a cached call of several tokens (a prefill) needs its position as a Python int")
        x, kv = self._trunk(idx, kv, pos)
        return self._logits(x[:, -1]), kv
