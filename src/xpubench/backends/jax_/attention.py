"""Which implementation ``jax.nn.dot_product_attention`` ran, read from the compiled program; whether it
compiles at all for a dtype on a device (``dtype_problem``).

``implementation="cudnn"`` lowers to a cuDNN fused-attention custom call (``__cudnn$fmha...``), and
XLA's GPU compiler could also rewrite plain attention into one; ``"xla"`` (and ``None``, which JAX
0.10 maps to xla) lowers to dots and a softmax. So the compiled HLO is the reliable witness: free
to read after ``.lower(...).compile()``, nothing runs.
"""

from __future__ import annotations

from typing import Any

CUDNN_FMHA = "__cudnn$fmha"


def attention_kernel(compiled: Any) -> str:
    """"cudnn" when the compiled program (a ``jax.stages.Compiled``) calls cuDNN's fused attention,
    else "xla"."""
    return "cudnn" if CUDNN_FMHA in compiled.as_text() else "xla"


def dtype_problem(device: Any, dtype_name: str) -> str | None:
    """Why ``jax.nn.dot_product_attention`` can't run in ``dtype_name`` on ``device``, or None: a tiny
    causal attention is compiled there (nothing is timed). On jax 0.10's CPU it computes fp16 logits with
    an fp16 x fp16 -> fp32 dot, which XLA's CPU backend refuses ("The precision 'F16_F16_F32' is not
    supported by dot_general on CPU"); the probe says so rather than a version check."""
    import jax
    import jax.numpy as jnp

    q = jax.device_put(jnp.zeros((1, 2, 1, 8), dtype=dtype_name), device)
    try:
        jax.jit(lambda q: jax.nn.dot_product_attention(q, q, q, is_causal=True)).lower(q).compile()
    except (ValueError, RuntimeError, NotImplementedError, TypeError) as exc:
        return (f"{dtype_name} attention (jax.nn.dot_product_attention) does not compile on {device.platform}: "
                f"{str(exc).splitlines()[0]}")
    return None
