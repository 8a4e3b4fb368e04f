"""The llama workload's record (``-w llama``): its options, presets, key, FLOPs and memory; its spec (made
from the options) is spec.py's, its models are models.py's.

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

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xpubench.workloads import gpt_models
from xpubench.workloads.base import Workload, WorkloadOption
from xpubench.workloads.llama import costs
from xpubench.workloads.llama.config import PRESETS
from xpubench.workloads.llama.models import (
    build_jax,
    build_torch,
    checkpoint,
    jax_generation_model,
    torch_generation_model,
)
from xpubench.workloads.llama.options import DECODE_STEPS, DEFAULT_PRESET, LlamaOptions, pin_options
from xpubench.workloads.llama.spec import (
    SIZE_OPTIONS,
    LlamaSpec,
    case_options,
    configure,
    generation_lengths,
)

# the brief default run's case: smollm-135m's shape with 4 of its 30 layers (its embedding, the largest
# part, whole: 42M parameters), a short prompt and a few tokens, torch's decode step compiled as the
# workload's default is (like with like against JAX's jitted step); on the 2-core VM a worker process of it
# takes ~10-25 s, torch's ~20-40 s with its cold compile (docs/workloads.md, "The brief run")
QUICK = {"n_layers": 4, "prompt_len": 64, "new_tokens": 16}
# a checkpoint's key part is its model's name and digest (``weights_id``, pin_options), not the path as typed
KEY_OPTIONS = ("preset", *SIZE_OPTIONS, "weights_id", "context", "prompt_len", "new_tokens", "depth", "decode",
               "int4_group_size")


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
    sources=tuple(str(p) for p in sorted(_HERE.glob("*.py"))),   # every module of the package: a new one too
    spec=configure({}), configure=configure, models={"torch": build_torch, "jax": build_jax},
    optimizers={"torch": gpt_models.torch_optimizer, "jax": gpt_models.jax_optimizer}, forward_flops=forward_flops,
    tokens_per_sample=tokens_per_sample, modes=("infer", "train"), default_modes=("infer",),
    default_precisions=costs.FORMATS[:4], quick_options=QUICK,   # int4 when asked for (-p int4)
    generates=True, served=True, generation_lengths=generation_lengths, decode_flops_per_token=decode_flops_per_token,
    generation_batch_sizes=(1,), generation_models={"torch": torch_generation_model, "jax": jax_generation_model},
    generation_counts=generation_counts, checkpoint=checkpoint, memory_needed=memory_needed,
    options=OPTIONS, Options=LlamaOptions, check_options=configure, key_options=KEY_OPTIONS, case_options=case_options,
    pin_options=pin_options, describe_options=describe)
