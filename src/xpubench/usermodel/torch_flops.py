"""FLOPs of one torch forward pass, counting what runs (torch's ``FlopCounterMode`` plus formulas for the
kernels it has none for), and saying so when something still runs uncounted.

``FlopCounterMode`` (torch/utils/flop_counter.py) counts an op it has a formula for, decomposes one it
has none for into ops it may have, and counts an op that neither has a formula nor decomposes as 0.
In torch 2.13 that silently drops the attention of the models people use:

- ``aten._scaled_dot_product_flash_attention_for_cpu``: the CPU kernel behind
  ``F.scaled_dot_product_attention`` (Hugging Face BERT / GPT-2 with ``attn_implementation="sdpa"``,
  their default; xpubench's own gpt). The CUDA kernels (flash, efficient, cuDNN) have formulas.
- ``aten._native_multi_head_attention``: ``nn.MultiheadAttention``'s fast path under ``eval()`` and
  ``no_grad`` (torchvision's ViT), which hides the Q/K/V and output projections too;
- ``aten._transformer_encoder_layer_fwd``: ``nn.TransformerEncoderLayer``'s fast path, the whole layer;
- ``aten.mv``, ``addmv``, ``dot``, ``vdot`` (a matrix times a vector) and ``_addmm_activation`` (a
  linear layer fused with its activation).

``EXTRA_FORMULAS`` gives these the counter's own conventions (``sdpa_flop_count``: QK^T and AV, 2 FLOPs
per multiply-add, a causal mask not halved), through ``FlopCounterMode(custom_mapping=...)``.

Any other op that does multiply-adds (``MULTIPLY_ADD_OP``: matmul, convolution, attention, recurrent
and FFT kernels by name) and ran without a formula is reported by ``count``; the caller then gives no
figure (n/a), never a count known to be short. Elementwise ops, normalisations, softmax and pooling are
not counted, as in the built-in workloads' formulas.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry, sdpa_flop_count

# an op (its name without "aten." and leading underscores) whose work is multiply-adds
MULTIPLY_ADD_OP = re.compile(r"(?:^|_)(mm|bmm|mv|dot|vdot|matmul|linear|addmv|addbmm|addr|einsum|tensordot|"
                             r"conv(?:olution|\dd|_transpose\dd|_depthwise\dd|_tbc)?|attention|attn|"
                             r"multi_head|transformer|rnn|lstm|gru|fft|stft|cdist)(?:$|_|\d)")


def _mha(query, key, value, embed_dim, num_heads, qkv_weight, *args, out_shape=None, **kwargs) -> int:
    """``nn.MultiheadAttention``'s fast path: projections of the query (B, L, E) and of key and value
    (B, S, E), QK^T and AV over all heads, the output projection."""
    b, length, e = query
    source = key[1]
    projections = 2 * b * e * e * (length + 2 * source) + 2 * b * length * e * e
    return projections + 4 * b * length * source * e


def _encoder_layer(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu,
                   norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
                   *args, out_shape=None, **kwargs) -> int:
    """``nn.TransformerEncoderLayer``'s fast path: self-attention over (B, L, E), then the feed-forward
    E -> F -> E."""
    b, length, e = src
    hidden = ffn_weight_1[0]
    return _mha(src, src, src, embed_dim, num_heads, qkv_weight) + 4 * b * length * e * hidden


def _sdpa(query, key, value, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query, key, value)


def _matrix_vector(matrix, vector, *args, out_shape=None, **kwargs) -> int:
    return 2 * matrix[0] * matrix[1]


def _addmv(self, matrix, vector, *args, out_shape=None, **kwargs) -> int:
    return _matrix_vector(matrix, vector)


def _dot(a, b, *args, out_shape=None, **kwargs) -> int:
    return 2 * a[0]


def _addmm_activation(self, a, b, *args, out_shape=None, **kwargs) -> int:
    return 2 * a[0] * a[1] * b[1]


EXTRA_FORMULAS: dict[str, Callable[..., int]] = {
    "_scaled_dot_product_flash_attention_for_cpu": _sdpa,
    "_scaled_dot_product_fused_attention_overrideable": _sdpa,
    "_scaled_dot_product_attention_math_for_mps": _sdpa,
    "_native_multi_head_attention": _mha,
    "_transformer_encoder_layer_fwd": _encoder_layer,
    "mv": _matrix_vector, "addmv": _addmv, "dot": _dot, "vdot": _dot,
    "_addmm_activation": _addmm_activation,
}


def extra_formulas() -> dict[Any, Callable[..., int]]:
    """``EXTRA_FORMULAS`` as FlopCounterMode's custom mapping: the ops this torch has and its counter has
    no formula for (a later torch that counts one itself keeps its own)."""
    ops = {getattr(torch.ops.aten, name, None): f for name, f in EXTRA_FORMULAS.items()}
    return {op: f for op, f in ops.items() if op is not None and op not in flop_registry}


@dataclass
class Count:
    flops: int                                                    # what the counter counted
    by_op: dict[str, int] = field(default_factory=dict)          # FLOPs per op ("aten.addmm")
    formulas: dict[str, int] = field(default_factory=dict)       # calls counted by EXTRA_FORMULAS
    uncounted: dict[str, int] = field(default_factory=dict)      # calls of multiply-add ops counted as 0


def count(call: Callable[[], Any], weights: Iterable[Any] = ()) -> Count:
    """Run ``call()`` (one forward pass) under FlopCounterMode with ``extra_formulas()``, under
    ``no_grad`` with the ``weights`` (the model's parameters: a torch module's ``parameters()``, a Keras
    model's variables) not requiring grad, and watch the ops it executes for multiply-add ops it counted
    as 0. Why the weights: the counter's module tracker hooks every module output that requires grad, and
    a layer that returns a weight as it is (keras_hub's BERT embeddings on torch) makes that hook fail
    ("Expected gradient function to be set") in a model that runs fine without the counter."""
    extra = extra_formulas()
    counter = FlopCounterMode(display=False, custom_mapping=extra)
    executed = _ExecutedOps()
    with torch.no_grad(), _frozen(weights), executed, counter:   # the counter on top: `executed` sees its leaves
        call()
    known = {str(op) for op in counter.flop_registry}
    by_op = {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}
    extra_names = {str(op) for op in extra}
    return Count(flops=int(counter.get_total_flops()), by_op=by_op,
                 formulas={op: n for op, n in executed.calls.items() if op in extra_names},
                 uncounted={op: n for op, n in executed.calls.items()
                            if op not in known and MULTIPLY_ADD_OP.search(op.rpartition(".")[2].lstrip("_"))})


class _ExecutedOps(TorchDispatchMode):
    """Counts the calls of each op (overload packet) that reaches it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls[str(func._overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


@contextmanager
def _frozen(weights: Iterable[Any]):
    """The ``weights`` with requires_grad off for the duration, as they were afterwards."""
    params = [p for p in weights if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)
