"""Attention with the fixed-size KV cache of ``flax_model``, written for what XLA:CPU compiles well.

The cache: per layer (k, v), each (B·KV, T_max, D) -- one row of positions per (sequence, KV head), the layout
the decode step's dots read as they are. Measured on the optimized HLO of smollm-135m's decode step (jax 0.10,
AMX Xeon, docs/workloads.md "The JAX decode step"): with (B, T_max, KV, D) XLA transposed every layer's keys
(and the probabilities) into copies at every token; with a 4-D (B, KV, T_max, D) it kept the in-place update
twice, once for the output and once reshaped for the dot, and so copied the whole cache on every call.

Decode (one new token at ``pos``, traced): the H query heads as KV groups of H/KV queries each (grouped-query
attention without repeating keys, as transformers' and torch_model's decode), scores against the whole cache in
float32 with the positions after ``pos`` masked out, so every step has the same shapes.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp


def write(cache, new, pos):
    """``cache`` (B·KV, T_max, D) with ``new`` (B, t, KV, D) written at positions pos .. pos + t - 1 (in place
    when the cache is donated)."""
    b, t, g, d = new.shape
    rows = new.astype(cache.dtype).transpose(0, 2, 1, 3).reshape(b * g, t, d)
    return jax.lax.dynamic_update_slice_in_dim(cache, rows, pos, axis=1)


def cached(cache, batch: int, positions: int):
    """The first ``positions`` of a cache as (B, positions, KV, D), the layout ``jax.nn.dot_product_attention``
    takes (a prefill after ``--depth`` cached positions)."""
    rows, _, d = cache.shape
    return cache[:, :positions].reshape(batch, rows // batch, positions, d).transpose(0, 2, 1, 3)


def decode(q, k_cache, v_cache, pos):
    """q (B, 1, H, D) against the caches (module docstring) -> (B, 1, H, D) in q's dtype."""
    b, _, h, d = q.shape
    rows, positions = k_cache.shape[:2]
    groups = q.reshape(rows, -1, d)                     # (B·KV, H/KV, D): each KV head's queries
    s = jnp.einsum("kgd,ktd->kgt", groups, k_cache, preferred_element_type=jnp.float32) / math.sqrt(d)
    s = jnp.where(jnp.arange(positions) <= pos, s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1).astype(v_cache.dtype)
    y = jnp.einsum("kgt,ktd->kgd", p, v_cache, preferred_element_type=jnp.float32).astype(q.dtype)
    return flat_row(y.reshape(b, h * d), pos).reshape(b, 1, h, d)


def flat_row(y, pos):
    """``y`` (B, C) in a buffer of its own of that shape. Why: the output projection's product fuses whatever
    reshape feeds it, and XLA:CPU's fused matrix-vector loop then reads a (KV, H/KV, D) = (3, 3, 64) attention
    output element by element through index arithmetic -- 0.4 ms for a 576 x 576 bf16 product that takes 0.04 ms
    from a (1, 576) row (smollm-135m; the o projection was a third of its bf16 decode step). Written into a
    buffer one column wider at an offset XLA cannot fold away (``min(pos, 0)``, always 0), then sliced: one
    small copy, no arithmetic changed."""
    b, c = y.shape
    wide = jax.lax.dynamic_update_slice(jnp.zeros((b, c + 1), y.dtype), y, (0, jnp.minimum(pos, 0)))
    return wide[:, :c]
