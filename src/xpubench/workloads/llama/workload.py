"""The llama workload's record (``-w llama``): its spec, options, presets, FLOPs and memory; its models
are models.py's.

- **Generation** (the default mode, "infer" -> the generation loop of harness/generation.py): the
  llama-bench protocol, a prompt of ``prompt_len`` tokens (default 512, llama-bench's pp512) then
  ``new_tokens`` generated greedily (default 128, tg128) with a KV cache, at batch 1 unless
  ``--batch-size`` sweeps it. Its precisions are the weight formats (``costs.FORMATS``: fp32, bf16,
  fp16, int8 and int4 weight-only, int4 in groups of ``int4_group_size`` (a [run.options] key, default
  32); tf32 is fp32 weights with TF32 matmuls). ``--depth D`` (llama-bench's ``-d``; a list sweeps,
  one case per depth) fills the KV cache with D tokens before the timed rounds, so pp and tg are
  measured after D tokens of context. ``--decode compiled|eager`` (a list sweeps) chooses PyTorch's
  decode step: ``compiled`` (the default: a static KV cache and ``torch.compile``, CUDA graphs on
  NVIDIA) or ``eager``; JAX's step is always compiled by XLA (its result's ``decode_step`` says so
  whatever the option; the brief default run's torch case compiles it too: docs/workloads.md, "The brief run").
  The depth (when not 0), the decode step and the int4 group size are in the case's key. The models
  (models.py) are ``torch_model.build`` and ``flax_model``'s, with the checkpoint's weights under
  ``--weights DIR`` (checkpoint.py), else random ones (the speed does not depend on the values).
- **Training** (``--mode train``): the same architecture through the training loop, next-token
  cross-entropy on sequences of ``context`` tokens (default 256), AdamW as gpt's.
- **Memory** (``memory_needed``): a generation case's weights + KV cache + activations (costs.py), a
  training case's weights, gradients and AdamW moments; plan/fit.py skips a case its device can't hold.

Sizes: ``--preset`` (smollm-135m, llama-1b, llama-8b: config.py), then any of the ``SIZE_OPTIONS``
([run.options] keys); changing ``hidden_size`` or ``n_heads`` without ``head_dim`` makes it
hidden_size / n_heads. ``--weights DIR`` takes the architecture from DIR/config.json instead.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xpubench.errors import UserError
from xpubench.workloads import gpt_models
from xpubench.workloads.base import Workload, WorkloadOption, WorkloadSpec
from xpubench.workloads.llama import costs
from xpubench.workloads.llama.config import PRESETS, LlamaConfig, from_hf_config
from xpubench.workloads.llama.models import (
    build_jax,
    build_torch,
    check_int4_group,
    checkpoint,
    jax_generation_model,
    torch_generation_model,
)
from xpubench.workloads.llama.options import (  # noqa: F401 - re-exported
    DECODE_STEPS,
    DEFAULT_PRESET,
    LlamaOptions,
    _checkpoint,
    pin_options,
    weights_id,
)

SIZE_OPTIONS = ("n_layers", "hidden_size", "n_heads", "n_kv_heads", "head_dim", "intermediate_size", "vocab_size")
GENERATION = (512, 128)           # (prompt_len, new_tokens): llama-bench's pp512 / tg128
# the brief default run's case: smollm-135m's shape with 4 of its 30 layers (its embedding, the largest
# part, whole: 42M parameters), a short prompt and a few tokens, torch's decode step compiled as the
# workload's default is (like with like against JAX's jitted step); on the 2-core VM a worker process of it
# takes ~10-25 s, torch's ~20-40 s with its cold compile (docs/workloads.md, "The brief run")
QUICK = {"n_layers": 4, "prompt_len": 64, "new_tokens": 16}
TRAIN_CONTEXT = 256
# a checkpoint's key part is its model's name and digest (``weights_id``, pin_options), not the path as typed
KEY_OPTIONS = ("preset", *SIZE_OPTIONS, "weights_id", "context", "prompt_len", "new_tokens", "depth", "decode",
               "int4_group_size")
SWEPT = ("depth", "decode")            # list options: one generation case per value (``case_options``)
DEFAULTS = LlamaOptions()              # each option's default, declared once (options.py)


@dataclass(frozen=True)
class LlamaSpec(WorkloadSpec):
    """A WorkloadSpec (training reads it) with the architecture (``config``) and where the weights come
    from; the training context T is ``input_shape[0]``."""

    config: LlamaConfig | None = None
    preset: str = DEFAULT_PRESET
    weights: str | None = None        # a checked local checkpoint directory (resolved), or None: random
    weights_sha256: str | None = None  # its digest, pinned by the plan (pin_options)
    attention: str = "auto"           # the SDPA kernel is recorded, not chosen (training reads it)
    decode: str = DEFAULTS.decode     # the decode step PyTorch runs (options.py DECODE_STEPS)
    int4_group_size: int = costs.DEFAULT_INT4_GROUP
    weight_decay: float = 0.1         # AdamW, as gpt's (gpt_models.torch_optimizer / jax_optimizer)
    betas: tuple[float, float] = (0.9, 0.95)

    @property
    def block_size(self) -> int:
        return self.input_shape[0]


def _positive(key: str, value: Any, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise UserError(f"llama: {key} must be a whole number of at least {least}, got {value!r}")
    return value


def _config(options: LlamaOptions) -> tuple[LlamaConfig, str, str | None]:
    """(architecture, preset name, checkpoint directory) of a case's options: a planned ``--weights``
    case's architecture is the one the plan pinned (``weights_config``); one pinned before it was
    (an older plan) is read from its folder, checked against the pinned digest."""
    weights = options.weights
    if weights is not None:
        if not isinstance(weights, str) or not weights.strip():
            raise UserError(f"--weights must be a checkpoint directory, got {weights!r}")
        given = [k for k in ("preset", *SIZE_OPTIONS) if k in options.given]
        if given:
            raise UserError(f"--weights {weights} takes the architecture from its config.json: drop "
                            f"{', '.join('--preset' if k == 'preset' else k for k in given)}")
        if options.weights_config is not None and options.weights_path and options.weights_sha256:
            cfg = from_hf_config(options.weights_config, name=Path(options.weights_path).name)
            return cfg, "checkpoint", options.weights_path
        ckpt = _checkpoint(options.weights_path or weights, options.weights_sha256)
        return ckpt.config, "checkpoint", str(Path(ckpt.path).expanduser().resolve())
    name = options.preset
    if name not in PRESETS:
        raise UserError(f"llama: unknown preset {name!r}; choose from: {', '.join(PRESETS)}")
    sizes = {k: _positive(k, getattr(options, k)) for k in SIZE_OPTIONS if getattr(options, k) is not None}
    if not sizes:
        return PRESETS[name], name, None
    base = PRESETS[name]
    if "head_dim" not in sizes and {"hidden_size", "n_heads"} & set(sizes):
        hidden, heads = sizes.get("hidden_size", base.hidden_size), sizes.get("n_heads", base.n_heads)
        if hidden % heads:
            raise UserError(f"llama: hidden_size ({hidden}) must be a multiple of n_heads ({heads}), or give head_dim")
        sizes["head_dim"] = hidden // heads
    said = ", ".join(f"{k} {v}" for k, v in sizes.items())
    return dataclasses.replace(base, name=f"{name} ({said})", **sizes), name, None


def _listed(value: Any) -> list:
    return [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]


def configure(options: LlamaOptions) -> LlamaSpec:
    """The spec a case asks for (module docstring); bad values raise UserError (plan time). A swept
    option (a list, before ``case_options`` splits it) is checked value by value; the spec holds the
    largest depth and the first decode step."""
    options = LlamaOptions.of(options)
    cfg, preset, weights = _config(options)
    depths = [_positive("depth", d, 0) for d in _listed(options.depth)] or [0]
    decodes = _listed(options.decode) or [DEFAULTS.decode]
    for step in decodes:
        if step not in DECODE_STEPS:
            raise UserError(f"--decode must be one of {', '.join(DECODE_STEPS)}, got {step!r}")
    group = options.int4_group_size
    if group not in costs.INT4_GROUP_SIZES or isinstance(group, bool):
        raise UserError(f"llama: int4_group_size must be one of {', '.join(map(str, costs.INT4_GROUP_SIZES))}, "
                        f"got {group!r}")
    if "int4_group_size" in options.given:   # asked for: checked now; the default is checked by an int4 model only
        check_int4_group(cfg, group)
    context = _positive("context", min(TRAIN_CONTEXT, cfg.max_positions) if options.context is None else
                        options.context, 2)
    if context > cfg.max_positions:
        raise UserError(f"llama: context {context} exceeds the model's {cfg.max_positions} positions")
    spec = LlamaSpec(
        name="llama", title=f"Llama decoder {cfg.name} ({costs.param_count(cfg) / 1e6:,.1f}M parameters)",
        dataset="tinyshakespeare", input_shape=(context,), input_kind="tokens", target_kind="token_seq",
        num_outputs=cfg.vocab_size, loss="softmax_ce", metric="accuracy", optimizer="adamw", learning_rate=3e-4,
        batch_sizes=(4,), quick_batch_size=1, epochs=1, train_samples=32, eval_samples=8,
        vocab_size=cfg.vocab_size, target_shape=(context,), config=cfg, preset=preset, weights=weights,
        weights_sha256=options.weights_sha256 if weights else None,
        depth=max(depths), decode=decodes[0], int4_group_size=group)
    generation_lengths(spec, options)
    return spec


def case_options(options: dict[str, Any]) -> list[dict]:
    """One options dict per generation case: the product of the swept lists (``SWEPT``: ``--depth``,
    ``--decode``), each a single value; depth 0 is left out (a case without a depth: the same key as
    before depths existed) and the decode step is always set (it is in the key: "compiled" or "eager")."""
    out = [{k: v for k, v in options.items() if k not in SWEPT}]
    for key in SWEPT:
        values = list(dict.fromkeys(_listed(options.get(key)) or [getattr(DEFAULTS, key)]))
        out = [dict(o, **({} if key == "depth" and v == 0 else {key: v})) for o in out for v in values]
    return out


def describe(options: dict[str, Any]) -> list[str]:
    """A case's given key options in words, as its row is labelled (workloads.options_text): a preset other
    than smollm-135m, a checkpoint by its name, "4/30 layers" (a preset cut short), "hidden_size 512",
    "pp64", "tg16", "d4096" (llama-bench's test names), "eager decode", "int4 groups of 64"."""
    words = [str(options["weights_id"])] if "weights_id" in options else []
    preset = options.get("preset", DEFAULT_PRESET)
    words += [str(preset)] if preset != DEFAULT_PRESET and not words else []
    for key in SIZE_OPTIONS:
        if key in options:
            whole = PRESETS[preset].n_layers if key == "n_layers" and preset in PRESETS else None
            words.append(f"{options[key]}/{whole} layers" if whole else f"{key} {options[key]}")
    for key, word in (("context", "context {}"), ("prompt_len", "pp{}"), ("new_tokens", "tg{}"), ("depth", "d{}"),
                      ("int4_group_size", "int4 groups of {}")):
        if options.get(key):
            words.append(word.format(options[key]))
    return words + ([f"{options['decode']} decode"] if options.get("decode", DECODE_STEPS[0]) != DECODE_STEPS[0]
                    else [])


def generation_lengths(spec: LlamaSpec, options: LlamaOptions) -> tuple[int, int]:
    """(prompt_len, new_tokens): the options, else 512 and 128 (a model of fewer than 1,024 positions: half
    and a quarter of them); new_tokens >= 2 (a prefill and a decode step) and depth + prompt_len +
    new_tokens - 1 within the model's positions; else UserError."""
    positions, options = spec.config.max_positions, LlamaOptions.of(options)
    prompt_len = _positive("prompt_len", min(GENERATION[0], positions // 2) if options.prompt_len is None else
                           options.prompt_len)
    new_tokens = _positive("new_tokens", max(2, min(GENERATION[1], positions // 4)) if options.new_tokens is None
                           else options.new_tokens, 2)
    if spec.depth + prompt_len + new_tokens - 1 > spec.config.max_positions:
        said = f"depth {spec.depth} + " if spec.depth else ""
        raise UserError(f"llama: {said}prompt_len {prompt_len} + new_tokens {new_tokens} - 1 exceed the model's "
                        f"{spec.config.max_positions} positions")
    return prompt_len, new_tokens


# ---- FLOPs, counts, memory ------------------------------------------------------------------------

def forward_flops(spec: LlamaSpec) -> float:
    """Forward FLOPs of one training sample: T tokens, causal attention, logits at every position."""
    return costs.prefill_flops(spec.config, spec.block_size, all_logits=True)


def tokens_per_sample(spec: LlamaSpec) -> int:
    return spec.block_size


def decode_flops_per_token(spec: LlamaSpec, context: float) -> float:
    return costs.decode_flops_per_token(spec.config, context)


def generation_counts(spec: LlamaSpec, batch: int, prompt_len: int, new_tokens: int, precision: str) -> dict:
    """The analytic counts a generation result carries (analysis/generation.py derives pp MFU and the
    share of the bandwidth bound from them): FLOPs of one prefill of the batch (its tokens attend to the
    ``depth`` cached ones too), bytes read per generated token at the decode steps' mean context (depth
    included), and the model's size as llama-bench gives it (``params``, the weights' bytes)."""
    fmt, cfg, d = costs.weight_format(precision), spec.config, spec.depth
    attend_depth = costs.attention_flops(cfg, d) * prompt_len * batch   # each prompt token x the depth
    return {"architecture": cfg.name, "depth": d, "params": costs.param_count(cfg),
            "model_bytes": costs.weight_bytes(cfg, fmt, group=spec.int4_group_size),
            "compute_precision": costs.compute_dtype(fmt) if fmt in costs.QUANTISED else precision,
            "int4_group_size": spec.int4_group_size if fmt == "int4" else None,
            "prefill_flops": costs.prefill_flops(cfg, prompt_len, batch) + attend_depth,
            "decode_bytes_per_token": costs.decode_bytes_per_token(cfg, fmt, batch, d + prompt_len + new_tokens / 2,
                                                                   group=spec.int4_group_size)}


@dataclass(frozen=True)
class TrainingNeed:
    """A training case's memory, a lower bound: fp32 weights, gradients and AdamW's two moments (16 bytes
    per parameter) and the logits with their gradient."""

    model: str
    batch: int
    context: int
    state: int
    logits: int

    @property
    def total(self) -> int:
        return self.state + self.logits

    def explain(self) -> str:
        return (f"{self.model} training needs at least {costs.gb(self.total)}: weights, gradients and AdamW "
                f"moments {costs.gb(self.state)} (16 bytes per parameter) + logits {costs.gb(self.logits)} "
                f"(batch {self.batch}, context {self.context})")


def memory_needed(spec: LlamaSpec, case: Any) -> Any:
    """The bytes a case needs on its device (costs.memory_needed for generation; TrainingNeed for training)."""
    batch = case.batch_size   # resolved by the planner (case.py)
    if case.mode == "train":
        cfg = spec.config
        return TrainingNeed(cfg.name, batch, spec.block_size, 16 * costs.param_count(cfg),
                            2 * 4 * batch * spec.block_size * cfg.vocab_size)
    prompt_len, new_tokens = generation_lengths(spec, case.options)
    return costs.memory_needed(spec.config, costs.weight_format(case.precision), batch, prompt_len, new_tokens,
                               depth=spec.depth)


# ---- the record -----------------------------------------------------------------------------------

OPTIONS = (
    WorkloadOption("preset", "llama: the model's shape", flag="--preset", choices=tuple(PRESETS), selects=True),
    WorkloadOption("weights", "llama: a local Hugging Face checkpoint directory (config.json + *.safetensors)",
                   flag="--weights", selects=True),
    *(WorkloadOption(key, f"llama: {key} (a [run.options] key)", least=1) for key in SIZE_OPTIONS),
    WorkloadOption("context", "llama training: tokens per sequence (a [run.options] key)", least=2),
    WorkloadOption("prompt_len", "llama generation: prompt tokens per sequence (default 512)", flag="--prompt-len",
                   least=1),
    WorkloadOption("new_tokens", "llama generation: tokens generated per sequence (default 128)", flag="--new-tokens",
                   least=2),
    WorkloadOption("depth", "llama generation: tokens already in the KV cache when pp and tg are timed (llama-bench's "
                            "-d; a comma list sweeps: 0,512,4096)", flag="--depth", least=0, is_list=True),
    WorkloadOption("decode", f"llama generation: PyTorch's decode step, {DECODE_STEPS[0]} (static KV cache + "
                             f"torch.compile; the default) or {DECODE_STEPS[1]} (a comma list sweeps)", flag="--decode",
                   is_list=True,
                   backend_option=True),   # torch's cases only (its record honours it)
    WorkloadOption("int4_group_size", "llama int4: weights per scale and zero point (32, 64, 128, 256; default 32)"),
)
_HERE = Path(__file__).parent
WORKLOAD = Workload(
    name="llama", title="Llama-family decoder (SmolLM, Llama 3)", kind="transformer",
    sources=tuple(str(_HERE / f) for f in ("workload.py", "models.py", "config.py", "costs.py", "checkpoint.py",
                                           "folder.py", "torch_model.py", "torch_weights.py", "flax_model.py")),
    spec=configure({}), configure=configure, models={"torch": build_torch, "jax": build_jax},
    optimizers={"torch": gpt_models.torch_optimizer, "jax": gpt_models.jax_optimizer}, forward_flops=forward_flops,
    tokens_per_sample=tokens_per_sample, modes=("infer", "train"), default_modes=("infer",),
    default_precisions=costs.FORMATS[:4], quick_options=QUICK,   # int4 when asked for (-p int4)
    generates=True, served=True, generation_lengths=generation_lengths, decode_flops_per_token=decode_flops_per_token,
    generation_batch_sizes=(1,), generation_models={"torch": torch_generation_model, "jax": jax_generation_model},
    generation_counts=generation_counts, checkpoint=checkpoint, memory_needed=memory_needed,
    options=OPTIONS, Options=LlamaOptions, check_options=configure, key_options=KEY_OPTIONS, case_options=case_options,
    pin_options=pin_options, describe_options=describe)
