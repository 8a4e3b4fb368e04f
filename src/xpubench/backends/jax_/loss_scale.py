"""Dynamic loss scaling for fp16 training in JAX, with the policy of PyTorch's ``torch.amp.GradScaler``
(so the two frameworks' fp16 cases do the same work):

- the loss is multiplied by ``scale`` (2^16 at the start) before differentiation, so gradients that
  are too small for fp16 (below ~6e-8) survive the backward pass; the gradients are divided by it again;
- a step whose gradients hold an inf or NaN is skipped (parameters and optimizer state unchanged) and
  the scale halves; after 2000 finite steps in a row the scale doubles.
bf16 needs none of this: it has fp32's exponent range.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

INITIAL_SCALE = 2.0**16
GROWTH_INTERVAL = 2000
FACTOR = 2.0
DESCRIPTION = ("dynamic (torch.amp.GradScaler's policy): scale 2^16, halved and the step skipped on inf/nan "
               "gradients, doubled after 2000 finite steps")


def init() -> dict:
    return {"scale": jnp.float32(INITIAL_SCALE), "good_steps": jnp.int32(0)}


def all_finite(tree) -> jax.Array:
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(tree)]))


def next_state(state: dict, finite) -> dict:
    good = state["good_steps"] + 1
    grow = finite & (good >= GROWTH_INTERVAL)
    scale = jnp.where(finite, jnp.where(grow, state["scale"] * FACTOR, state["scale"]), state["scale"] / FACTOR)
    return {"scale": scale.astype(jnp.float32), "good_steps": jnp.where(finite & ~grow, good, 0).astype(jnp.int32)}


def scaled_grad(objective, params, state: dict):
    """``jax.value_and_grad(objective, has_aux=True)`` of a scaled loss: ((loss, aux), unscaled grads,
    whether every gradient is finite)."""
    def scaled(p):
        loss, aux = objective(p)
        return loss * state["scale"], (loss, aux)

    (_, (loss, aux)), grads = jax.value_and_grad(scaled, has_aux=True)(params)
    grads = jax.tree.map(lambda g: g / state["scale"].astype(g.dtype), grads)
    return (loss, aux), grads, all_finite(grads)


def keep_if(finite, new, old):
    """``new`` where the step's gradients were finite, else ``old`` (a skipped step)."""
    return jax.tree.map(lambda n, o: jnp.where(finite, n, o), new, old)
