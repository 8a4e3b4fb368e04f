"""A llama case's spec (``LlamaSpec``, what its models, training and generation read) from its options
(options.py's ``LlamaOptions``): ``configure`` checks them at plan time (a bad value raises UserError) and
makes the architecture, a ``--preset`` with any ``SIZE_OPTIONS`` or the ``--weights`` checkpoint's
config.json as the plan pinned it; ``generation_lengths`` gives a generation case's prompt and generated
tokens; ``case_options`` makes one case per value of a swept list (``--depth``, ``--decode``). The
record that hands them to the harness is workload.py."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xpubench.errors import UserError
from xpubench.workloads.base import WorkloadSpec
from xpubench.workloads.llama import costs
from xpubench.workloads.llama.config import PRESETS, LlamaConfig, from_hf_config
from xpubench.workloads.llama.models import check_int4_group
from xpubench.workloads.llama.options import DECODE_STEPS, DEFAULT_PRESET, LlamaOptions, _checkpoint

SIZE_OPTIONS = ("n_layers", "hidden_size", "n_heads", "n_kv_heads", "head_dim", "intermediate_size", "vocab_size")
GENERATION = (512, 128)           # (prompt_len, new_tokens): llama-bench's pp512 / tg128
TRAIN_CONTEXT = 256
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
