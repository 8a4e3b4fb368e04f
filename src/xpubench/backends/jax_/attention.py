"""Which implementation ``jax.nn.dot_product_attention`` ran, read from the compiled program.

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
