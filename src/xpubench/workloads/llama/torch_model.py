"""The Llama decoder in PyTorch (architecture: ``llama/config.py``), numerically as transformers'
``LlamaForCausalLM``, with a preallocated KV cache for generation.

Layout: ``embed`` (V, C); per block ``attn_norm``, ``qkv`` (q | k | v rows, (H + 2·KV)·D x C), ``o``,
``mlp_norm``, ``gate_up`` (gate | up rows, 2I x C), ``down``; ``norm``; ``head`` (V, C) when untied,
else the head is ``embed``. Fusing q/k/v and gate/up changes no value: each output row is the same dot
product as in transformers' separate projections (``hf_tensors.target`` says which rows are which).

Numerics as transformers': RMSNorm in float32, cast back, then times its weight; RoPE's cos and sin
computed in float32 from float32 inverse frequencies and cast to the compute dtype; rotate_half layout;
attention ``scaled_dot_product_attention`` with scale 1/sqrt(D).

Weight formats (``costs.FORMATS``): fp32 / bf16 / fp16 hold every parameter in that dtype; int8 and
int4 hold every matmul weight (projections, embedding table, head) quantised, in a ``Proj``
(torch_weights.py), which dequantises it inside the forward.

KV cache (``new_cache``): keys and values, a (B, KV, T_max, D) tensor per layer in the compute dtype,
written in place. One tensor per layer, not one (L, ...) tensor indexed per layer: ``torch.compile``
functionalises an in-place write into a view of a graph input as a write of the whole base, so with a
single (L, ...) cache the compiled step rebuilt every layer's slice of it once per layer at each step
(a select_scatter chain: L x L cache-slice reads per token, measured 2.4x faster than eager at 4 layers
and slower than eager at smollm-135m's 30); a write into a whole input is done in place.
``forward(idx, cache, pos)`` with t = idx.shape[1] tokens: a prefill at ``pos`` (0, or after ``pos``
cached positions: --depth; keys/values written at pos..pos+t-1, token i attending to 0..pos+i) or a
decode step (t = 1: written at ``pos``, attends to 0..pos, a view of the cache). ``decode_static``
is the decode step of fixed shapes that ``torch.compile`` compiles once: the position a tensor, the
whole cache attended to under a mask. Without a cache: causal attention over idx (the reference;
training).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from xpubench.workloads.llama.checkpoint import Checkpoint
from xpubench.workloads.llama.config import LlamaConfig, rope_inv_freq
from xpubench.workloads.llama.costs import DEFAULT_INT4_GROUP, DEFAULT_INT8_COMPUTE, compute_dtype
from xpubench.workloads.llama.hf_tensors import target
from xpubench.workloads.llama.torch_weights import PACKED_MAX_ROWS, Proj, int8pack_available, widening_note

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
INIT_STD = 0.02           # transformers' initializer_range for Llama


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float, dtype: torch.dtype, device=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size, dtype=dtype, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        return self.weight * F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps).to(x.dtype)


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig, dtype: torch.dtype, quant: dict, device=None):
        super().__init__()
        c, i = cfg.hidden_size, cfg.intermediate_size
        self.heads, self.kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.attn_norm = RMSNorm(c, cfg.rms_norm_eps, dtype, device)
        self.qkv = Proj(cfg.q_size + 2 * cfg.kv_size, c, dtype, device=device, **quant)
        self.o = Proj(c, cfg.q_size, dtype, device=device, **quant)
        self.mlp_norm = RMSNorm(c, cfg.rms_norm_eps, dtype, device)
        self.gate_up = Proj(2 * i, c, dtype, device=device, **quant)
        self.down = Proj(c, i, dtype, device=device, **quant)

    def attend(self, q, k, v, kv, pos):
        """Attention of the t new positions (q, k, v: (B, t, heads, D)), the cache written first."""
        b, t, h, d = q.shape
        g = self.kv_heads
        if kv is None:
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=t > 1, enable_gqa=g != h).transpose(1, 2)
        k_cache, v_cache = kv                                            # (B, KV, T_max, D)
        if isinstance(pos, torch.Tensor):
            # the static decode step (``decode_static``): the same shapes at every position (compiled
            # once), the whole cache attended to with the positions after ``pos`` masked out
            k_cache.index_copy_(2, pos.view(1), k.transpose(1, 2))
            v_cache.index_copy_(2, pos.view(1), v.transpose(1, 2))
            mask = (torch.arange(k_cache.shape[2], device=q.device) <= pos)[None, :]
            return F.scaled_dot_product_attention(q.reshape(b, g, h // g, d), k_cache, v_cache, attn_mask=mask)
        k_cache[:, :, pos:pos + t] = k.transpose(1, 2)
        v_cache[:, :, pos:pos + t] = v.transpose(1, 2)
        if t == 1:
            # decode: the H query heads as KV groups of H/KV queries each, against the cached positions
            # (transformers' pack_gqa): no mask, no repeated keys
            return F.scaled_dot_product_attention(q.reshape(b, g, h // g, d), k_cache[:, :, :pos + 1],
                                                  v_cache[:, :, :pos + 1])
        if pos == 0:
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=True, enable_gqa=g != h).transpose(1, 2)
        # a prefill after ``pos`` cached positions (--depth): token i attends to 0 .. pos + i
        keys = torch.arange(pos + t, device=q.device)
        mask = keys[None, :] <= pos + torch.arange(t, device=q.device)[:, None]
        return F.scaled_dot_product_attention(q.transpose(1, 2), k_cache[:, :, :pos + t], v_cache[:, :, :pos + t],
                                              attn_mask=mask, enable_gqa=g != h).transpose(1, 2)

    def forward(self, x, cos, sin, kv=None, pos=0):
        b, t, _ = x.shape
        h, g, d = self.heads, self.kv_heads, self.head_dim
        qkv = self.qkv(self.attn_norm(x)).view(b, t, h + 2 * g, d)
        qk = rope(qkv[:, :, :h + g], cos, sin)                            # (B, t, H + KV, D)
        y = self.attend(qk[:, :, :h], qk[:, :, h:], qkv[:, :, h + g:], kv, pos)
        x = x + self.o(y.reshape(b, t, h * d))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding, rotate_half layout: x (B, t, heads, D), cos/sin (t, 1, D/2)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class LlamaTorch(nn.Module):
    """The model (module docstring). ``fmt`` one of fp32, bf16, fp16, int8 (``int8_compute``: the
    activation dtype of int8). Parameters are uninitialised: ``init_random`` or ``load_checkpoint``."""

    def __init__(self, cfg: LlamaConfig, fmt: str = "fp32", device: torch.device | str = "cpu",
                 int8_compute: str = DEFAULT_INT8_COMPUTE, group: int = DEFAULT_INT4_GROUP):
        super().__init__()
        self.cfg, self.fmt = cfg, fmt
        self.dtype = DTYPES[compute_dtype(fmt, int8_compute)]
        int8, dtype = fmt == "int8", self.dtype
        quant = {"int8": int8, "int4": fmt == "int4", "group": group}
        self.embed = Proj(cfg.vocab_size, cfg.hidden_size, dtype, device=device, **quant)
        self.layers = nn.ModuleList(Block(cfg, dtype, quant, device) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype, device)
        self.head = self.embed if cfg.tie_embeddings else Proj(cfg.vocab_size, cfg.hidden_size, dtype, device=device,
                                                               **quant)
        self.register_buffer("inv_freq", torch.tensor(rope_inv_freq(cfg), dtype=torch.float32, device=device),
                             persistent=False)
        if int8:
            packed = int8pack_available(torch.device(device), dtype)
            for m in self.modules():
                if isinstance(m, Proj):
                    m.packed = packed

    def projections(self) -> list[tuple[str, Proj]]:
        return [(n, m) for n, m in self.named_modules() if isinstance(m, Proj)]

    def n_params(self) -> int:
        """Parameters as the architecture counts them (int8 / int4 values count, their scales do not)."""
        return sum(m.shape[0] * m.shape[1] for _, m in self.projections()) + \
            sum(m.weight.numel() for m in self.modules() if isinstance(m, RMSNorm))

    @torch.no_grad()
    def init_random(self, seed: int = 0, std: float = INIT_STD) -> LlamaTorch:
        """transformers' Llama init: N(0, std) matrices, RMSNorm weights one; drawn on the device in
        float32 row blocks (int8 quantises them)."""
        gen = torch.Generator(device=self.inv_freq.device).manual_seed(seed)
        for _, m in self.projections():
            rows, cols = m.shape
            step = max(1, (1 << 24) // cols)
            for start in range(0, rows, step):
                block = torch.empty(min(step, rows - start), cols, device=self.inv_freq.device)
                m.set_rows(start, block.normal_(0.0, std, generator=gen))
        for m in self.modules():
            if isinstance(m, RMSNorm):
                m.weight.fill_(1.0)
        return self.finish()

    def finish(self) -> LlamaTorch:
        """After the weights are set: int4 projections multiply through the CPU int4 kernel where it runs
        (the embedding keeps its rows for lookups)."""
        for name, m in self.projections():
            if m.int4:
                m.use_int4_kernel(keep_rows=name == "embed")
        return self

    @torch.no_grad()
    def load_checkpoint(self, ckpt: Checkpoint) -> LlamaTorch:
        """Every tensor of a checked checkpoint into its place (``hf_tensors.target``)."""
        if dataclasses.replace(ckpt.config, name=self.cfg.name) != self.cfg:
            raise ValueError("the model was built for another config than the checkpoint's")
        for name, tensor in ckpt.tensors("pt"):
            layer, slot, row = target(self.cfg, name)
            owner = self if layer is None else self.layers[layer]
            module = getattr(owner, slot)
            if isinstance(module, RMSNorm):
                module.weight.copy_(tensor.to(module.weight.dtype))
            else:
                module.set_rows(row, tensor)
        return self.finish()

    @property
    def context(self) -> int:
        """Positions the model can attend to (generation's protocol, backends/torch_/generate.py)."""
        return self.cfg.max_positions

    def weight_tensors(self) -> list[torch.Tensor]:
        """Every weight the model stores (projections, their scales and zeros, the int4 kernel's layout,
        norms), the tied table once."""
        weights = []
        for _, m in self.projections():
            weights += [m.weight, *(getattr(m, n) for n in ("scale", "zero") if hasattr(m, n)), *(m.kernel or ())]
        return list(dict.fromkeys(weights + [p for n, p in self.named_parameters() if "norm" in n]))

    def int8_method(self) -> str | None:
        """How the int8 / int4 weights are used in the timed steps (None for float formats)."""
        dtype = str(self.dtype).removeprefix("torch.")
        if self.fmt == "int4":
            group = self.embed.group
            if self.embed.kernel is None:
                return (f"int4 weights two per byte, a scale and a zero per {group}; dequantised to {dtype} in every "
                        "step, then F.linear")
            return (f"int4 weights two per byte, a scale and a zero per {group}; torch._weight_int4pack_mm_for_cpu "
                    "(dequantised in the kernel) for every matmul; the embedding's rows unpacked for lookups")
        if self.fmt != "int8":
            return None
        dense = f"F.linear(x, w.to({dtype})) * per-row scale"
        compiled = "a compiled CPU decode step: fused multiply-sums of the int8 rows, the scale applied to the sums"
        if not next((m.packed for _, m in self.projections()), False):
            return f"int8 weights, per-row scales; dequantised in every step: {dense} ({compiled})"
        return (f"int8 weights, per-row scales; torch._weight_int8pack_mm for <= {PACKED_MAX_ROWS} rows (decode; "
                f"{compiled}), {dense} for more (prefill)")

    def generation_facts(self) -> dict:
        """What a generation result records of the model: its weights' bytes as allocated, their format and
        how int8 is computed."""
        return {"weight_bytes": sum(t.numel() * t.element_size() for t in self.weight_tensors()),
                "weight_format": self.fmt, "int8_method": self.int8_method(), "params": self.n_params(),
                "matmul_widening": widening_note(self.dtype, self.inv_freq.device)}

    def new_cache(self, batch: int, positions: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Zeroed keys and values, one (B, KV, positions, D) tensor per layer (separate allocations, not
        views of one (L, ...) tensor: module docstring), in the compute dtype, on the model's device."""
        shape = (batch, self.cfg.n_kv_heads, positions, self.cfg.head_dim)
        dev = self.inv_freq.device
        return tuple([torch.zeros(shape, dtype=self.dtype, device=dev) for _ in range(self.cfg.n_layers)]
                     for _ in "kv")

    def forward(self, idx: torch.Tensor, cache=None, pos: int | torch.Tensor = 0,
                last_only: bool = False) -> torch.Tensor:
        """(B, t) ids -> logits (B, t, V), or (B, 1, V) with ``last_only``; module docstring for the cache."""
        t = idx.shape[1]
        positions = (pos + torch.arange(t, device=idx.device)).to(torch.float32)
        freqs = (positions[:, None] * self.inv_freq[None, :])[:, None, :]        # (t, 1, D/2)
        cos, sin = freqs.cos().to(self.dtype), freqs.sin().to(self.dtype)
        x = self.embed.rows(idx, self.dtype)
        for i, block in enumerate(self.layers):
            x = block(x, cos, sin, None if cache is None else (cache[0][i], cache[1][i]), pos)
        x = self.norm(x[:, -1:] if last_only else x)
        return self.head(x)

    def decode_static(self, token: torch.Tensor, k: list[torch.Tensor], v: list[torch.Tensor],
                      pos: torch.Tensor) -> torch.Tensor:
        """One decode step of fixed shapes, what ``torch.compile`` compiles once (gpt-fast's
        ``decode_one_token``): token (B,) ids at position ``pos`` (a 0-d int64 tensor), the cache (k, v)
        as ``new_cache`` made it, written in place; attends to the whole cache, positions after ``pos``
        masked out (k, v: ``new_cache``'s lists of per-layer tensors). Returns the next tokens (B,) (greedy)."""
        return self(token[:, None], (k, v), pos, last_only=True)[:, -1].argmax(-1)


def build(cfg: LlamaConfig, fmt: str = "fp32", device: torch.device | str = "cpu", seed: int = 0,
          checkpoint: Checkpoint | None = None, int8_compute: str = DEFAULT_INT8_COMPUTE,
          group: int = DEFAULT_INT4_GROUP) -> LlamaTorch:
    """A ready model in eval mode: the checkpoint's weights, else random ones from ``seed``."""
    model = LlamaTorch(cfg, fmt, device, int8_compute, group)
    model = model.load_checkpoint(checkpoint) if checkpoint is not None else model.init_random(seed)
    return model.eval()
