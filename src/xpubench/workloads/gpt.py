"""GPT: a nanoGPT-style decoder-only transformer (GPT-2 architecture), in PyTorch and flax: the workload
(spec, presets, options, FLOPs, the record); its models are gpt_models.py's.

Data: character-level tiny-shakespeare through ``xpubench.data.text`` (byte ids; the corpus is ASCII,
so one byte is one character; vocabulary 256, the byte range, already a multiple of 64), or synthetic
token ids (speed runs). Sizes: ``PRESETS`` and ``configure(options)``; the context T is the spec's
``input_shape[0]``.

FLOPs (``forward_flops``): PaLM's estimate (Chowdhery et al. 2022, "PaLM: Scaling Language Modeling
with Pathways", appendix B), as nanoGPT's ``estimate_mfu`` uses it: training FLOPs per token
6N + 12·L·H·Q·T, where N is nanoGPT's ``get_num_params()``: every parameter except the position
embeddings (the token embeddings stay in: they are also the output layer's weights).

No Keras model: the planner plans gpt for torch and jax only. ``--mode infer`` runs the generation loop
(``generates``; harness/generation.py) over ``GENERATION_BATCH_SIZES``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from xpubench.errors import UserError
from xpubench.workloads import gpt_models
from xpubench.workloads.base import Workload, WorkloadOption, WorkloadSpec
from xpubench.workloads.gpt_generation import GENERATION_BATCH_SIZES, GPTOptions, generation_lengths
from xpubench.workloads.gpt_models import (  # noqa: F401 - check_attention re-exported: gpt's names in one place
    JAX_ATTENTION,
    TORCH_ATTENTION,
    build_jax,
    build_torch,
    check_attention,
    jax_optimizer,
    torch_optimizer,
)


@dataclass(frozen=True)
class GPTSpec(WorkloadSpec):
    """A WorkloadSpec with the transformer's shape; the context T is ``input_shape[0]``."""

    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    attention: str = "auto"
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    preset: str = "small"

    @property
    def block_size(self) -> int:
        return self.input_shape[0]


def _spec(preset: str, n_layer: int, n_head: int, n_embd: int, block_size: int, vocab: int, *,
          batch: int, lr: float, train: int, evals: int, epochs: int = 1) -> GPTSpec:
    return GPTSpec(
        name="gpt", title=f"GPT decoder ({preset}: {n_layer} layers, {n_head} heads, {n_embd} wide)",
        dataset="tinyshakespeare", input_shape=(block_size,), input_kind="tokens", target_kind="token_seq",
        num_outputs=vocab, loss="softmax_ce", metric="accuracy", optimizer="adamw", learning_rate=lr,
        batch_sizes=(batch,), quick_batch_size=batch, epochs=epochs, train_samples=train, eval_samples=evals,
        vocab_size=vocab, target_shape=(block_size,), n_layer=n_layer, n_head=n_head, n_embd=n_embd,
        preset=preset)


# small: the CPU default. On the 2-core VM under load 2-4: a quick case (3 epochs x 2 steps) 18-22 s
# per backend, start and compile included; a step at batch 16 (2,048 tokens) 0.25-0.6 s in torch with
# one thread (1.6-5.9 s with two fighting other processes), 0.4-0.7 s in JAX. A full run (-w gpt): 2
# epochs of 64 steps. Real data: 7,781 train / 865 test windows of 129 bytes (docs/workloads.md, GPT).
# gpt2: GPT-2 small (124M; vocabulary 50,257 padded up to a multiple of 64), for accelerators.
PRESETS: dict[str, GPTSpec] = {
    "small": _spec("small", 4, 4, 128, 128, 256, batch=16, lr=1e-3, train=1_024, evals=256, epochs=2),
    "gpt2": _spec("gpt2", 12, 12, 768, 1024, 50_304, batch=8, lr=6e-4, train=2_048, evals=64),
}
SPEC: GPTSpec = PRESETS["small"]
SIZE_OPTIONS = ("n_layer", "n_head", "n_embd", "block_size")
GENERATION_OPTIONS = ("prompt_len", "new_tokens")
KEY_OPTIONS = ("preset", *SIZE_OPTIONS, "attention", *GENERATION_OPTIONS)   # configure() reads them; Case.key


def configure(options: GPTOptions) -> GPTSpec:
    """The spec a case asks for: its preset, then any of n_layer, n_head, n_embd, block_size (positive
    ints; n_embd a multiple of n_head) and attention. Bad values raise UserError (plan time)."""
    options = GPTOptions.of(options)
    if options.preset not in PRESETS:
        raise UserError(f"gpt: unknown preset {options.preset!r}; choose from: {', '.join(PRESETS)}")
    spec = PRESETS[options.preset]
    sizes = {key: getattr(options, key) for key in SIZE_OPTIONS if getattr(options, key) is not None}
    for key, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserError(f"gpt: {key} must be a positive integer, got {value!r}")
    if "block_size" in sizes:
        t = sizes.pop("block_size")
        sizes.update(input_shape=(t,), target_shape=(t,))
    attention = options.attention or spec.attention
    if attention not in set(TORCH_ATTENTION) | set(JAX_ATTENTION):
        raise UserError(f"gpt: attention must be one of {', '.join(dict.fromkeys(TORCH_ATTENTION + JAX_ATTENTION))}, "
                        f"got {attention!r}")
    spec = dataclasses.replace(spec, attention=attention, **sizes)
    if options.prompt_len is not None or options.new_tokens is not None:
        generation_lengths(spec, options)   # checked when planned (the defaults fit any context)
    if spec.n_embd % spec.n_head:
        raise UserError(f"gpt: n_embd ({spec.n_embd}) must be a multiple of n_head ({spec.n_head})")
    if sizes:
        spec = dataclasses.replace(spec, title=f"GPT decoder ({spec.n_layer} layers, {spec.n_head} heads, "
                                               f"{spec.n_embd} wide, context {spec.block_size})")
    return spec


# ---- sizes and FLOPs ------------------------------------------------------------------------------

def param_count(spec: GPTSpec, *, non_embedding: bool = False) -> int:
    """Trainable parameters (the tied output layer counted once). ``non_embedding``: without the
    position embeddings (nanoGPT's ``get_num_params()``, the N of the FLOPs formula).

    Per block 12C² + 13C: c_attn 3C² + 3C, c_proj C² + C, c_fc 4C² + 4C, c_proj 4C² + C, two LayerNorms 4C.
    """
    c = spec.n_embd
    n = spec.n_layer * (12 * c * c + 13 * c) + spec.num_outputs * c + 2 * c
    return n if non_embedding else n + spec.block_size * c


def train_flops_per_token(spec: GPTSpec) -> int:
    """6N + 12·L·H·Q·T (PaLM appendix B; nanoGPT ``estimate_mfu``): 6 FLOPs per weight per token
    (forward 2, backward 4) plus attention's QK^T and AV products against all T positions (not halved
    for the causal mask), forward and backward. H·Q = C."""
    return 6 * param_count(spec, non_embedding=True) + 12 * spec.n_layer * spec.n_embd * spec.block_size


def decode_flops_per_token(spec: GPTSpec, context: float) -> float:
    """Forward FLOPs of one token attending to ``context`` positions: 2N + 4·L·C·context (the weights,
    then QK^T and AV against the cached keys and values; PaLM appendix B's forward third)."""
    return 2 * param_count(spec, non_embedding=True) + 4 * spec.n_layer * spec.n_embd * context


def tokens_per_sample(spec: GPTSpec) -> int:
    """Tokens a training sample holds (its T positions are all predicted): tokens/s = samples/s x T."""
    return spec.block_size


def forward_flops(spec: GPTSpec) -> int:
    """Forward FLOPs for one sample of T tokens: a third of the training figure, T·(2N + 4·L·C·T)."""
    return spec.block_size * train_flops_per_token(spec) // 3


# ---- the record -----------------------------------------------------------------------------------

OPTIONS = (
    WorkloadOption("preset", "gpt: the model's size", flag="--preset", choices=tuple(PRESETS), selects=True),
    *(WorkloadOption(key, f"gpt: {key} (a [run.options] key)", least=1) for key in SIZE_OPTIONS),
    WorkloadOption("attention", "gpt: the attention kernel (default auto)", flag="--attention",
                   choices=tuple(dict.fromkeys(TORCH_ATTENTION + JAX_ATTENTION))),
    WorkloadOption("prompt_len", "gpt generation: prompt tokens per sequence", flag="--prompt-len", least=1),
    WorkloadOption("new_tokens", "gpt generation: tokens generated per sequence", flag="--new-tokens", least=2),
)
WORKLOAD = Workload(
    name="gpt", title="GPT decoder (nanoGPT-style)", kind="transformer", sources=(__file__, gpt_models.__file__),
    spec=SPEC, configure=configure, models={"torch": build_torch, "jax": build_jax},
    optimizers={"torch": torch_optimizer, "jax": jax_optimizer}, forward_flops=forward_flops,
    tokens_per_sample=tokens_per_sample, generates=True, generation_lengths=generation_lengths,
    decode_flops_per_token=decode_flops_per_token, generation_batch_sizes=GENERATION_BATCH_SIZES,
    options=OPTIONS, Options=GPTOptions, check_options=configure, key_options=KEY_OPTIONS)
