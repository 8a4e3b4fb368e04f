"""A flax model as a JAX case runs it (training, inference, generation): its matmul precision
(``matmul_precision``), its forward pass in the case's compute precision (``make_apply``, with ``cast_floats``)
and its parameters initialised as one compiled program (``init_variables``; ``quick_options``: the compiler
options of such a program, run once and untimed).
"""

from __future__ import annotations

from contextlib import nullcontext

import jax
import jax.numpy as jnp

from xpubench.backends.jax_.device import DTYPES


def cast_floats(tree, dtype):
    return jax.tree.map(lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a, tree)


def matmul_precision(precision: str) -> str:
    """The ``jax.default_matmul_precision`` a case traces its model under: fp32 matmuls and
    convolutions are true fp32 ("highest": without it XLA runs them as TF32 on Ampere+ GPUs and as
    bf16 passes on TPUs), ``tf32`` asks for "tensorfloat32"; bf16/fp16 cases keep XLA's default (their
    operands are 16-bit already). The same as PyTorch, where TF32 is off unless asked for."""
    return {"tf32": "tensorfloat32", "bf16": "default", "fp16": "default"}.get(precision, "highest")


def make_apply(model, precision: str):
    """apply(params, extra, x, train, rng) -> (out, new_extra) in the case's compute precision.

    The model is traced under ``jax.default_matmul_precision(matmul_precision(precision))``: every
    dot and convolution of the forward pass carries that precision, and so do their transposes in the
    backward pass (a jitted step's lowered StableHLO shows ``precision = [HIGHEST, HIGHEST]``)."""
    compute = DTYPES.get(precision, jnp.float32)
    mm_precision = matmul_precision(precision)

    def apply(params, extra, x, train, rng):
        if compute != jnp.float32:
            params, x = cast_floats(params, compute), cast_floats(x, compute)
        variables = {"params": params, **extra}
        mutable = list(extra) if (train and extra) else False
        with jax.default_matmul_precision(mm_precision) if mm_precision != "default" else nullcontext():
            result = model.apply(variables, x, train=train, rngs={"dropout": rng} if train else None,
                                 mutable=mutable)
        out, new_extra = result if mutable else (result, extra)
        return out, cast_floats(new_extra, jnp.float32)
    return apply


# The init program (and the gallery's logits) run once, untimed: on the CPU they are compiled at XLA's lowest
# backend optimisation level (LLVM's expensive passes off; XLA's HLO passes, which decide what is computed, still
# run): init's compile on the 2-core VM, CPU s, default -> lowest: cifar10_resnet 17.0 -> 3.7, mnist_cnn 6.3 -> 1.4,
# shakespeare_lstm 3.8 -> 2.8, weather_gru 3.0 -> 1.8; the parameters agree to ~8 digits, not bit for bit (sum of
# |w|, mnist_cnn: 9016.51600 against 9016.51601). Other platforms compile them as jax.jit does.
QUICK_INIT_OPTIONS = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def quick_options() -> dict | None:
    """The compiler options of a program run once, untimed: QUICK_INIT_OPTIONS on the CPU, else JAX's own."""
    return QUICK_INIT_OPTIONS if jax.default_backend() == "cpu" else None


def init_variables(model, spec, x_sample, seed: int):
    """The model's parameters and other collections (batch statistics), initialised as one compiled XLA
    program: run eagerly, flax dispatches (and compiles) every initialiser and every op of the traced
    forward pass one at a time (44 programs for the MNIST CNN; tests/test_jax_init.py)."""
    params_key, dropout_key = jax.random.split(jax.random.key(seed))
    rngs = {"params": params_key, "dropout": dropout_key}
    init = jax.jit(lambda rngs, x: model.init(rngs, x, train=False))
    options = quick_options()
    if options is None or isinstance(params_key, jax.core.Tracer):   # traced by a caller (eval_shape, jit): as jit
        variables = init(rngs, x_sample)
    else:
        variables = init.lower(rngs, x_sample).compile(options)(rngs, x_sample)
    params = variables["params"]
    extra = {k: v for k, v in variables.items() if k != "params"}
    return params, extra
