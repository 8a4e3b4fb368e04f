"""The Llama-family architecture as data: ``LlamaConfig``, the presets with their published shapes, and
``from_hf_config`` for a Hugging Face ``config.json``. No framework is imported here.

The architecture (Touvron et al. 2023, "LLaMA"; Grattafiori et al. 2024, "The Llama 3 Herd of Models";
the reference is transformers' ``LlamaForCausalLM``): token embedding -> L x block -> RMSNorm -> head;
block: x + attn(rmsnorm(x)); x + mlp(rmsnorm(x)) (pre-norm, no biases anywhere);
attention: grouped-query (``n_heads`` query heads share ``n_kv_heads`` key/value heads), rotary position
embeddings on q and k in the "rotate_half" layout (the two halves of each head are the pairs);
mlp: SwiGLU, ``down(silu(gate(x)) * up(x))``. The head is the embedding table (tied) or its own matrix.

Presets (the config.json of each model on the Hugging Face hub):
- ``smollm-135m``: HuggingFaceTB/SmolLM-135M (30 layers, 576 wide, 9 heads / 3 KV heads, MLP 1,536,
  vocabulary 49,152, tied, theta 10,000, 2,048 positions) — 134.5M parameters;
- ``llama-1b``: meta-llama/Llama-3.2-1B (16 layers, 2,048 wide, 32 / 8 heads, MLP 8,192, vocabulary
  128,256, tied, theta 500,000, llama3 RoPE scaling factor 32) — 1.236B;
- ``llama-8b``: meta-llama/Llama-3.1-8B (32 layers, 4,096 wide, 32 / 8 heads, MLP 14,336, untied,
  theta 500,000, llama3 RoPE scaling factor 8) — 8.03B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from xpubench.errors import UserError
from xpubench.results.validate import FLAG, TEXT, Check, Invalid, list_of, number, optional, record, whole

ROPE_TYPES = ("default", "llama3")
# The largest value each size may take: far above the largest published Llama-family model (Llama 3.1
# 405B: 126 layers, 16,384 wide, MLP 53,248, 128 heads, vocabulary 128,256, 131,072 positions), and small
# enough that what is built from a config before any fit check (the list of tensors its checkpoint must
# hold) stays small: a config.json of 10^6 layers is refused, not planned.
LIMITS = {"n_layers": 2048, "hidden_size": 1 << 18, "n_heads": 1 << 14, "n_kv_heads": 1 << 14, "head_dim": 1 << 14,
          "intermediate_size": 1 << 20, "vocab_size": 1 << 24, "max_positions": 1 << 26}


@dataclass(frozen=True)
class RopeScaling:
    """Llama 3.1's frequency-dependent RoPE scaling (transformers' ``rope_type: "llama3"``): wavelengths
    longer than ``original_max_position_embeddings / low_freq_factor`` are stretched by ``factor``,
    shorter than ``... / high_freq_factor`` kept, the band between interpolated smoothly."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int
    rope_type: str = "llama3"


@dataclass(frozen=True)
class LlamaConfig:
    """A Llama-family decoder's shape. ``head_dim`` need not be ``hidden_size / n_heads``."""

    name: str
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    rope_theta: float = 10_000.0
    rope_scaling: RopeScaling | None = None
    rms_norm_eps: float = 1e-5
    tie_embeddings: bool = False
    max_positions: int = 2048

    def __post_init__(self) -> None:
        for key, most in LIMITS.items():
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
                raise UserError(f"llama {self.name}: {key} must be a whole number from 1 to {most:,}, got {value!r}")
        if self.n_heads % self.n_kv_heads:
            raise UserError(f"llama {self.name}: n_heads ({self.n_heads}) must be a multiple of "
                            f"n_kv_heads ({self.n_kv_heads})")
        if self.head_dim % 2:
            raise UserError(f"llama {self.name}: head_dim must be even for rotary embeddings, got {self.head_dim}")
        if not 0 < self.rope_theta < math.inf or not 0 < self.rms_norm_eps < math.inf:
            raise UserError(f"llama {self.name}: rope_theta and rms_norm_eps must be positive")

    @property
    def q_size(self) -> int:
        return self.n_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.n_kv_heads * self.head_dim


PRESETS: dict[str, LlamaConfig] = {
    "smollm-135m": LlamaConfig("smollm-135m", n_layers=30, hidden_size=576, n_heads=9, n_kv_heads=3, head_dim=64,
                               intermediate_size=1536, vocab_size=49_152, rope_theta=10_000.0,
                               rms_norm_eps=1e-5, tie_embeddings=True, max_positions=2048),
    "llama-1b": LlamaConfig("llama-1b", n_layers=16, hidden_size=2048, n_heads=32, n_kv_heads=8, head_dim=64,
                            intermediate_size=8192, vocab_size=128_256, rope_theta=500_000.0,
                            rope_scaling=RopeScaling(32.0, 1.0, 4.0, 8192), rms_norm_eps=1e-5,
                            tie_embeddings=True, max_positions=131_072),
    "llama-8b": LlamaConfig("llama-8b", n_layers=32, hidden_size=4096, n_heads=32, n_kv_heads=8, head_dim=128,
                            intermediate_size=14_336, vocab_size=128_256, rope_theta=500_000.0,
                            rope_scaling=RopeScaling(8.0, 1.0, 4.0, 8192), rms_norm_eps=1e-5,
                            tie_embeddings=False, max_positions=131_072),
}


def preset(name: str) -> LlamaConfig:
    if name not in PRESETS:
        raise UserError(f"llama: unknown preset {name!r}; choose from: {', '.join(PRESETS)}")
    return PRESETS[name]


def rope_inv_freq(cfg: LlamaConfig) -> list[float]:
    """The ``head_dim / 2`` rotary inverse frequencies ``theta^(-2i/d)``, with Llama 3's scaling applied
    when the config has it (transformers' ``_compute_llama3_parameters``, computed here in float64; the
    frameworks round them to float32 as transformers does)."""
    d = cfg.head_dim
    inv = [1.0 / cfg.rope_theta ** (i / d) for i in range(0, d, 2)]
    s = cfg.rope_scaling
    if s is None:
        return inv
    low_wavelen = s.original_max_position_embeddings / s.low_freq_factor
    high_wavelen = s.original_max_position_embeddings / s.high_freq_factor
    out = []
    for f in inv:
        wavelen = 2 * math.pi / f
        if wavelen < high_wavelen:
            out.append(f)
        elif wavelen > low_wavelen:
            out.append(f / s.factor)
        else:
            smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (
                s.high_freq_factor - s.low_freq_factor)
            out.append((1 - smooth) * f / s.factor + smooth * f)
    return out


# ---- Hugging Face config.json ----------------------------------------------------------------------

REQUIRED = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
# config.json's name of each LlamaConfig size (LIMITS bounds both)
HF_SIZES = {"num_hidden_layers": "n_layers", "hidden_size": "hidden_size", "num_attention_heads": "n_heads",
            "num_key_value_heads": "n_kv_heads", "head_dim": "head_dim", "intermediate_size": "intermediate_size",
            "vocab_size": "vocab_size", "max_position_embeddings": "max_positions"}


def _positive(most: float) -> Check:
    """A number above 0 (and finite, at most ``most``): epsilons, RoPE's theta and factors."""
    bounded = number(0, most)

    def check(value: Any, at: str) -> None:
        bounded(value, at)
        if not value > 0:
            raise Invalid(f"{at} must be a number above 0, got {value!r}")
    return check


def _anything(value: Any, at: str) -> None:
    """The keys xpubench does not read (bos_token_id, torch_dtype, ...) may hold anything."""


# Every key of config.json that xpubench reads, with the type and range it must have: one place, checked
# before any value is used, so a string where a number belongs ("false" for tie_word_embeddings), a
# number where a list belongs, or a size of 10^6 is one line naming the key, never a traceback or a
# silent misreading. (A file's NaN and Infinity are refused earlier, by readfile.loads_json.)
ROPE = record({"rope_type": TEXT, "type": TEXT, "rope_theta": _positive(1e12), "factor": _positive(1e6),
               "low_freq_factor": _positive(1e6), "high_freq_factor": _positive(1e6),
               "original_max_position_embeddings": whole(1, LIMITS["max_positions"])}, rest=_anything)
HF_CONFIG = record({
    "architectures": optional(list_of(TEXT)), "model_type": TEXT, "hidden_act": TEXT,
    "tie_word_embeddings": FLAG, "attention_bias": FLAG, "mlp_bias": FLAG,
    "rms_norm_eps": _positive(1.0), "rope_theta": _positive(1e12),
    "rope_scaling": optional(ROPE), "rope_parameters": optional(ROPE),
    **{key: whole(1, LIMITS[ours]) for key, ours in HF_SIZES.items()},
}, rest=_anything)


def _rope(config: dict[str, Any], where: str) -> tuple[float, RopeScaling | None]:
    """(theta, scaling) from either layout: transformers 4's ``rope_theta`` + ``rope_scaling``, or
    transformers 5's ``rope_parameters`` (which holds ``rope_theta`` and the scaling keys together)."""
    params = config.get("rope_parameters") or config.get("rope_scaling") or {}
    params = {k: v for k, v in params.items() if v is not None}
    theta = params.get("rope_theta", config.get("rope_theta", 10_000.0))
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in ROPE_TYPES:
        raise UserError(f"{where}: RoPE type {kind!r} is not supported (supported: {', '.join(ROPE_TYPES)})")
    if kind == "default":
        return float(theta), None
    keys = ("factor", "low_freq_factor", "high_freq_factor")
    missing = [k for k in keys if k not in params]
    if missing:
        raise UserError(f"{where}: llama3 RoPE scaling lacks {', '.join(missing)}")
    original = params.get("original_max_position_embeddings", config.get("max_position_embeddings", 2048))
    values = [params[k] for k in keys]
    if values[1] >= values[2]:
        raise UserError(f"{where}: llama3 RoPE scaling needs low_freq_factor < high_freq_factor, got "
                        f"{values[1]!r} and {values[2]!r}")
    return float(theta), RopeScaling(*(float(v) for v in values), int(original))


def _quantization(value: Any) -> str:
    """What a quantized checkpoint's ``quantization_config`` says it is: its quant_method, else itself."""
    method = value.get("quant_method") if isinstance(value, dict) else None
    return method[:40] if isinstance(method, str) and method else f"quantization_config {str(value)[:40]!r}"


def from_hf_config(config: dict[str, Any], name: str = "checkpoint", where: str = "config.json") -> LlamaConfig:
    """A ``LlamaConfig`` from a Hugging Face ``config.json`` (parsed) of a ``LlamaForCausalLM``. Every
    key it reads is checked first (``HF_CONFIG``); anything this implementation would compute
    differently (another architecture, biases, another activation, another RoPE type, a quantized
    checkpoint) is a UserError naming the field."""
    if not isinstance(config, dict):
        raise UserError(f"{where}: expected a JSON object, got {type(config).__name__}")
    if "quantization_config" in config:
        raise UserError(f"{where}: quantized checkpoints ({_quantization(config['quantization_config'])})"
                        f" are not supported; use a float16/bfloat16/float32 checkpoint")
    try:
        HF_CONFIG(config, "config")
    except Invalid as exc:
        raise UserError(f"{where}: {str(exc).removeprefix('config.')}") from None
    config = {k: v for k, v in config.items() if v is not None}   # null is transformers' "not set"
    archs = config.get("architectures") or []
    if archs and "LlamaForCausalLM" not in archs:
        raise UserError(f"{where}: architecture {', '.join(archs)[:200]} is not supported (only LlamaForCausalLM)")
    if not archs and config.get("model_type") != "llama":
        raise UserError(f"{where}: model_type {config.get('model_type')!r} is not supported (only 'llama')")
    missing = [k for k in REQUIRED if config.get(k) is None]
    if missing:
        raise UserError(f"{where}: lacks {', '.join(missing)}")
    if config.get("hidden_act", "silu") != "silu":
        raise UserError(f"{where}: hidden_act {config['hidden_act'][:40]!r} is not supported (only 'silu')")
    for key in ("attention_bias", "mlp_bias"):
        if config.get(key, False):
            raise UserError(f"{where}: {key} true is not supported (Llama has no biases)")
    theta, scaling = _rope(config, where)
    heads, hidden = config["num_attention_heads"], config["hidden_size"]
    head_dim = config.get("head_dim") or (hidden // heads if hidden % heads == 0 else None)
    if head_dim is None:
        raise UserError(f"{where}: hidden_size {hidden} is not a multiple of num_attention_heads {heads} "
                        f"and there is no head_dim")
    try:
        return LlamaConfig(
            name=name, n_layers=config["num_hidden_layers"], hidden_size=hidden, n_heads=heads,
            n_kv_heads=config.get("num_key_value_heads") or heads, head_dim=head_dim,
            intermediate_size=config["intermediate_size"], vocab_size=config["vocab_size"], rope_theta=theta,
            rope_scaling=scaling, rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
            tie_embeddings=config.get("tie_word_embeddings", False) is True,
            max_positions=config.get("max_position_embeddings") or 2048)
    except UserError as exc:
        raise UserError(f"{where}: {str(exc).split(': ', 1)[1]}") from None


def to_hf_config(cfg: LlamaConfig) -> dict[str, Any]:
    """The ``config.json`` of a ``LlamaForCausalLM`` with this shape (transformers 4 layout, which
    transformers 5 still reads): what ``checkpoint.write_checkpoint`` saves."""
    out: dict[str, Any] = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "attention_bias": False, "mlp_bias": False, "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size, "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads, "num_key_value_heads": cfg.n_kv_heads, "head_dim": cfg.head_dim,
        "vocab_size": cfg.vocab_size, "rms_norm_eps": cfg.rms_norm_eps, "rope_theta": cfg.rope_theta,
        "rope_scaling": None, "tie_word_embeddings": cfg.tie_embeddings,
        "max_position_embeddings": cfg.max_positions,
    }
    if cfg.rope_scaling is not None:
        out["rope_scaling"] = {f.name: getattr(cfg.rope_scaling, f.name) for f in fields(cfg.rope_scaling)}
    return out
