"""A ``LlamaForCausalLM``'s tensors as transformers names and shapes them (``hf_tensor_shapes``: what a
checkpoint must hold, checkpoint.py) and where each goes in the models here (``target``: torch_model.py's
and flax_params.py's loaders).

Where each tensor goes (``target``): both frameworks hold q, k and v as one fused projection ("qkv",
rows q | k | v of the (out, in) matrix) and gate and up as one ("gate_up", rows gate | up), so a
tensor maps to (layer or None, slot, first row). The q and k rows are used as stored: transformers'
``LlamaForCausalLM`` applies RoPE in the "rotate_half" layout (the first and second halves of each head
are the pairs), and so do both models here; checkpoints converted from Meta's interleaved layout are
already permuted by transformers' conversion script.
"""

from __future__ import annotations

import re

from xpubench.workloads.llama.config import LlamaConfig

LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
# per-layer HF tensor -> (slot, which part of the fused slot: index into the slot's row blocks)
LAYER_TARGETS = {
    "input_layernorm.weight": ("attn_norm", 0), "self_attn.q_proj.weight": ("qkv", 0),
    "self_attn.k_proj.weight": ("qkv", 1), "self_attn.v_proj.weight": ("qkv", 2),
    "self_attn.o_proj.weight": ("o", 0), "post_attention_layernorm.weight": ("mlp_norm", 0),
    "mlp.gate_proj.weight": ("gate_up", 0), "mlp.up_proj.weight": ("gate_up", 1),
    "mlp.down_proj.weight": ("down", 0),
}
TOP_TARGETS = {"model.embed_tokens.weight": "embed", "model.norm.weight": "norm", "lm_head.weight": "head"}


def hf_tensor_shapes(cfg: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor of a ``LlamaForCausalLM`` with this config, as transformers names and shapes it."""
    c, i = cfg.hidden_size, cfg.intermediate_size
    per_layer = {"input_layernorm.weight": (c,), "self_attn.q_proj.weight": (cfg.q_size, c),
                 "self_attn.k_proj.weight": (cfg.kv_size, c), "self_attn.v_proj.weight": (cfg.kv_size, c),
                 "self_attn.o_proj.weight": (c, cfg.q_size), "post_attention_layernorm.weight": (c,),
                 "mlp.gate_proj.weight": (i, c), "mlp.up_proj.weight": (i, c), "mlp.down_proj.weight": (c, i)}
    shapes = {"model.embed_tokens.weight": (cfg.vocab_size, c)}
    for n in range(cfg.n_layers):
        shapes.update({f"model.layers.{n}.{k}": s for k, s in per_layer.items()})
    shapes["model.norm.weight"] = (c,)
    if not cfg.tie_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab_size, c)
    return shapes


def slot_blocks(cfg: LlamaConfig, slot: str) -> tuple[int, ...]:
    """Row counts of the blocks a slot is made of (qkv: q, k, v; gate_up: gate, up)."""
    return {"qkv": (cfg.q_size, cfg.kv_size, cfg.kv_size),
            "gate_up": (cfg.intermediate_size, cfg.intermediate_size)}.get(slot, (0,))


def target(cfg: LlamaConfig, name: str) -> tuple[int | None, str, int]:
    """(layer index or None, slot, first row in the slot's (out, in) matrix) of an HF tensor name."""
    if name in TOP_TARGETS:
        return None, TOP_TARGETS[name], 0
    m = LAYER.match(name)
    if not m or m.group(2) not in LAYER_TARGETS:
        raise KeyError(name)
    slot, part = LAYER_TARGETS[m.group(2)]
    return int(m.group(1)), slot, sum(slot_blocks(cfg, slot)[:part])
