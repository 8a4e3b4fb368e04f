"""GPT's models (the workload is declared in gpt.py): the torch and flax modules and their optimizers.

    input (T,) int32 token ids < V; target (T,) the next token at every position
    wte (V, C) + wpe (T, C) -> L x Block -> LayerNorm -> logits = x @ wte.T (tied)  -> (T, V)
    Block: x + attn(ln_1(x)); x + mlp(ln_2(x))                                    (pre-LayerNorm)
      attn: c_attn C -> 3C (q, k, v), H heads of Q = C/H, causal softmax(q k^T / sqrt(Q)) v, c_proj C -> C
      mlp:  c_fc C -> 4C, GELU (exact erf, as torch's nn.GELU()), c_proj 4C -> C

Biases on every linear layer and LayerNorm (eps 1e-5), no dropout (nanoGPT's pre-training default).
Initialisation as nanoGPT's: N(0, 0.02) for linear weights and both embeddings, N(0, 0.02/sqrt(2L))
for the two residual projections (``c_proj``), zero biases, LayerNorm scale 1. Both frameworks draw
from the same distributions (values differ).

Parameter layout (flax names; torch's ``h.0.attn.c_attn.weight`` is flax's
``h_0/attn/c_attn/kernel`` transposed)::

    wte/embedding (V, C)  wpe/embedding (T, C)  h_<i>/{ln_1, attn/{c_attn, c_proj}, ln_2, mlp/{c_fc, c_proj}}  ln_f

Attention: ``torch.nn.functional.scaled_dot_product_attention`` under ``torch.nn.attention.sdpa_kernel``
when a kernel is asked for (``spec.attention``: auto, flash, efficient, cudnn, math), and
``jax.nn.dot_product_attention(implementation=...)`` (auto = None, xla, cudnn). A kernel that cannot
run raises; nothing falls back. Which kernel ran is recorded by ``backends/*/attention.py``.

Optimizer: AdamW, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on every parameter of 2 or more
dimensions (matmul weights and both embeddings), none on biases and LayerNorm parameters (nanoGPT's
``configure_optimizers`` split): ``torch_optimizer`` / ``jax_optimizer``.

Generation with a KV cache: the torch module's ``forward(idx, kv, pos, last_only)``, the flax module's
``extend(idx, kv, pos)`` (see their docstrings); ``backends/*/generate.py`` drive them.

``spec`` is a ``gpt.GPTSpec`` everywhere here.
"""

from __future__ import annotations

import math
from typing import Any

from xpubench.errors import UserError

TORCH_ATTENTION = ("auto", "flash", "efficient", "cudnn", "math")
JAX_ATTENTION = ("auto", "xla", "cudnn")
LN_EPS = 1e-5
INIT_STD = 0.02


def check_attention(spec: Any, framework: str) -> None:
    """Refuse an attention kernel the framework does not offer (torch: TORCH_ATTENTION, jax: JAX_ATTENTION)."""
    choices = TORCH_ATTENTION if framework == "torch" else JAX_ATTENTION
    if spec.attention not in choices:
        raise UserError(f"gpt: attention {spec.attention!r} does not exist in {framework}; "
                        f"choose from: {', '.join(choices)}")



# ---- PyTorch --------------------------------------------------------------------------------------

def build_torch(spec: Any) -> Any:
    """``torch.nn.Module``: ``forward(idx, kv=None, pos=0, last_only=False)`` on (B, t) int ids ->
    (B, t, V) logits ((B, 1, V) with ``last_only``).

    kv: None (training and uncached inference: causal attention over idx), or a KV cache, a pair of
    tensors (L, B, H, T_max, Q) for keys and values. The new keys and values are written at positions
    ``pos .. pos+t-1`` and the queries attend to positions ``0 .. pos+t-1``. Two uses: a prefill (pos 0,
    t = prompt length, causal) and a decode step (t = 1, any pos).
    """
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.nn.attention import SDPBackend, sdpa_kernel

    check_attention(spec, "torch")
    kernels = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
               "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}
    c, n_head = spec.n_embd, spec.n_head

    class CausalSelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = nn.Linear(c, 3 * c)
            self.c_proj = nn.Linear(c, c)

        def forward(self, x, kv=None, pos: int = 0):
            b, t, _ = x.shape
            q, k, v = (z.view(b, t, n_head, c // n_head).transpose(1, 2)    # (B, H, t, Q)
                       for z in self.c_attn(x).split(c, dim=2))
            if kv is not None:
                k_cache, v_cache = kv                                       # (B, H, T_max, Q)
                k_cache[:, :, pos:pos + t] = k
                v_cache[:, :, pos:pos + t] = v
                if t == 1:                                                  # decode: attend to all so far
                    k, v = k_cache[:, :, :pos + 1], v_cache[:, :, :pos + 1]
                elif pos != 0:
                    raise ValueError("a cached call of several tokens must start at position 0 (prefill)")
            y = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
            return self.c_proj(y.transpose(1, 2).reshape(b, t, c))

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_fc = nn.Linear(c, 4 * c)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * c, c)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(c, eps=LN_EPS)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(c, eps=LN_EPS)
            self.mlp = MLP()

        def forward(self, x, kv=None, pos: int = 0):
            x = x + self.attn(self.ln_1(x), kv, pos)
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attention = spec.attention
            self.wte = nn.Embedding(spec.num_outputs, c)
            self.wpe = nn.Embedding(spec.block_size, c)
            self.h = nn.ModuleList(Block() for _ in range(spec.n_layer))
            self.ln_f = nn.LayerNorm(c, eps=LN_EPS)
            for name, p in self.named_parameters():
                if p.dim() < 2:
                    continue   # biases zero, LayerNorm scales one: torch's defaults already
                std = INIT_STD / math.sqrt(2 * spec.n_layer) if name.endswith("c_proj.weight") else INIT_STD
                nn.init.normal_(p, mean=0.0, std=std)
            for block in self.h:
                nn.init.zeros_(block.attn.c_attn.bias)
                nn.init.zeros_(block.attn.c_proj.bias)
                nn.init.zeros_(block.mlp.c_fc.bias)
                nn.init.zeros_(block.mlp.c_proj.bias)

        def forward(self, idx, kv=None, pos: int = 0, last_only: bool = False):
            if self.attention == "auto":
                return self._forward(idx, kv, pos, last_only)
            try:
                with sdpa_kernel(kernels[self.attention]):
                    return self._forward(idx, kv, pos, last_only)
            except RuntimeError as exc:
                if "No viable backend" not in str(exc) and "No available kernel" not in str(exc):
                    raise
                raise RuntimeError(f"attention kernel {self.attention!r} cannot run here ({idx.device.type}, "
                                   f"{self.wte.weight.dtype}): {exc}") from None

        def _forward(self, idx, kv, pos, last_only):
            t = idx.shape[1]
            if pos + t > spec.block_size:
                raise ValueError(f"positions up to {pos + t} exceed the context of {spec.block_size}")
            x = self.wte(idx) + self.wpe(torch.arange(pos, pos + t, device=idx.device))   # (B, t, C)
            for i, block in enumerate(self.h):
                x = block(x, None if kv is None else (kv[0][i], kv[1][i]), pos)
            x = self.ln_f(x[:, -1:] if last_only else x)
            return F.linear(x, self.wte.weight)                                            # tied head

    return GPT()


def torch_optimizer(params: Any, spec: Any, lr: float, *, fused: bool | None = None) -> Any:
    """AdamW over ``params`` (e.g. ``model.parameters()``, which yields the tied embedding once) with
    nanoGPT's split: weight decay on parameters of >= 2 dimensions only."""
    import torch

    params = list(params)
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": spec.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=spec.betas, eps=1e-8, fused=fused)


# ---- JAX / flax -----------------------------------------------------------------------------------

def build_jax(spec: Any) -> Any:
    """``flax.linen.Module``: ``__call__(idx, train)`` on (B, t) int ids -> (B, t, V) logits, and
    ``extend(idx, kv, pos) -> (logits of the last position (B, V), kv)`` for generation.

    kv: a tuple over layers of (k, v), each (B, T_max, H, Q), of fixed size. ``extend`` with t > 1 is
    the prefill (pos must be 0: causal attention over idx, keys and values written at 0..t-1); with
    t = 1 a decode step at ``pos`` (an int32 scalar, may be traced): the key and value are written at
    ``pos`` and the query attends to positions 0..pos (``key_value_seq_lengths``; the rest of the
    fixed-size cache is masked out, whatever it holds).
    """
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    check_attention(spec, "jax")
    implementation = None if spec.attention == "auto" else spec.attention
    c, n_head = spec.n_embd, spec.n_head
    dense = nn.initializers.normal(INIT_STD)
    proj = nn.initializers.normal(INIT_STD / math.sqrt(2 * spec.n_layer))

    class CausalSelfAttention(nn.Module):
        def setup(self) -> None:
            self.c_attn = nn.Dense(3 * c, kernel_init=dense)
            self.c_proj = nn.Dense(c, kernel_init=proj)

        def __call__(self, x, kv=None, pos=0):
            b, t, _ = x.shape
            q, k, v = (z.reshape(b, t, n_head, c // n_head) for z in jnp.split(self.c_attn(x), 3, axis=-1))
            lengths = None
            if kv is not None:
                k_cache, v_cache = kv                                        # (B, T_max, H, Q)
                k_cache = jax.lax.dynamic_update_slice_in_dim(k_cache, k.astype(k_cache.dtype), pos, axis=1)
                v_cache = jax.lax.dynamic_update_slice_in_dim(v_cache, v.astype(v_cache.dtype), pos, axis=1)
                kv = (k_cache, v_cache)
                if t == 1:
                    k, v = k_cache, v_cache
                    lengths = jnp.full((b,), pos + 1, dtype=jnp.int32)
            y = jax.nn.dot_product_attention(q, k, v, is_causal=t > 1, key_value_seq_lengths=lengths,
                                             implementation=implementation)
            return self.c_proj(y.reshape(b, t, c)), kv

    class MLP(nn.Module):
        def setup(self) -> None:
            self.c_fc = nn.Dense(4 * c, kernel_init=dense)
            self.c_proj = nn.Dense(c, kernel_init=proj)

        def __call__(self, x):
            return self.c_proj(nn.gelu(self.c_fc(x), approximate=False))

    class Block(nn.Module):
        def setup(self) -> None:
            self.ln_1 = nn.LayerNorm(epsilon=LN_EPS)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(epsilon=LN_EPS)
            self.mlp = MLP()

        def __call__(self, x, kv=None, pos=0):
            a, kv = self.attn(self.ln_1(x), kv, pos)
            x = x + a
            return x + self.mlp(self.ln_2(x)), kv

    class GPT(nn.Module):
        def setup(self) -> None:
            self.wte = nn.Embed(spec.num_outputs, c, embedding_init=dense)
            self.wpe = nn.Embed(spec.block_size, c, embedding_init=dense)
            self.h = [Block() for _ in range(spec.n_layer)]
            self.ln_f = nn.LayerNorm(epsilon=LN_EPS)

        def _trunk(self, idx, kv, pos):
            t = idx.shape[1]
            x = self.wte(idx) + self.wpe(pos + jnp.arange(t))                 # (B, t, C)
            new_kv = []
            for i, block in enumerate(self.h):
                x, layer_kv = block(x, None if kv is None else kv[i], pos)
                new_kv.append(layer_kv)
            return x, tuple(new_kv)

        def __call__(self, idx, train: bool = False):
            x, _ = self._trunk(idx, None, 0)
            return self.wte.attend(self.ln_f(x))                                # tied head

        def extend(self, idx, kv, pos):
            if idx.shape[1] > 1 and not (isinstance(pos, int) and pos == 0):
                raise ValueError("a cached call of several tokens must start at position 0 (prefill)")
            x, kv = self._trunk(idx, kv, pos)
            return self.wte.attend(self.ln_f(x[:, -1])), kv

    return GPT()


def jax_optimizer(spec: Any, lr: float) -> Any:
    """optax AdamW with nanoGPT's split: weight decay on parameters of >= 2 dimensions only."""
    import jax
    import optax

    b1, b2 = spec.betas
    return optax.adamw(lr, b1=b1, b2=b2, eps=1e-8, weight_decay=spec.weight_decay,
                       mask=lambda params: jax.tree.map(lambda p: p.ndim >= 2, params))
