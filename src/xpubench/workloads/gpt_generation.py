"""gpt's own options (``GPTOptions``, the workload's ``Options``) and its generation's lengths: the prompt
and the tokens generated per sequence, from a case's options or the preset's defaults, and the batch
sweep of a generation run (harness/generation.py measures it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xpubench.case import Options
from xpubench.errors import UserError

# per preset: (prompt_len, new_tokens); small fits the 2-core CPU (a round of 32 tokens in well under a
# second at batch 16), gpt2 is GPT-2 small's usual serving shape
GENERATION = {"small": (64, 32), "gpt2": (128, 128)}
GENERATION_BATCH_SIZES = (1, 4, 16)   # one case each: the throughput-latency trade-off


@dataclass(frozen=True, eq=False, kw_only=True)
class GPTOptions(Options):
    """gpt's own options (``Workload.Options``): the preset, then sizes that replace the preset's (None:
    the preset's), the attention kernel (None: the preset's, "auto") and the generation lengths (None:
    the preset's, ``generation_lengths``)."""

    preset: str = "small"
    n_layer: int | None = None
    n_head: int | None = None
    n_embd: int | None = None
    block_size: int | None = None
    attention: str | None = None
    prompt_len: int | None = None
    new_tokens: int | None = None


def generation_lengths(spec: Any, options: Any) -> tuple[int, int]:
    """(prompt_len, new_tokens) of a generation case: its options' (gpt.GPTOptions), else the preset's ``GENERATION``
    (the prompt cut to the context). Both positive ints, new_tokens >= 2 (a prefill and a decode step),
    and prompt_len + new_tokens - 1 within the context; else UserError."""
    options = GPTOptions.of(options)   # a planned case's, as they are
    default_prompt, default_new = GENERATION.get(spec.preset, GENERATION["small"])
    given = options.prompt_len, options.new_tokens
    lengths = {"prompt_len": min(default_prompt, spec.block_size // 2) if given[0] is None else given[0],
               "new_tokens": max(2, min(default_new, spec.block_size // 2)) if given[1] is None else given[1]}
    for key, value in lengths.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserError(f"gpt: {key} must be a positive integer, got {value!r}")
    prompt_len, new_tokens = lengths["prompt_len"], lengths["new_tokens"]
    if new_tokens < 2:
        raise UserError(f"gpt: new_tokens must be at least 2 (a prefill and a decode step), got {new_tokens}")
    if prompt_len + new_tokens - 1 > spec.block_size:
        raise UserError(f"gpt: prompt_len {prompt_len} + new_tokens {new_tokens} - 1 exceed the context of "
                        f"{spec.block_size} positions")
    return prompt_len, new_tokens
