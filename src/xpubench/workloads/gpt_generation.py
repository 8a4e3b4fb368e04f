"""GPT generation's lengths: the prompt and the tokens generated per sequence, from a case's options or
the preset's defaults, and the batch sweep of a generation run (harness/generation.py measures it).
"""

from __future__ import annotations

from typing import Any

from xpubench.errors import UserError

# per preset: (prompt_len, new_tokens); small fits the 2-core CPU (a round of 32 tokens in well under a
# second at batch 16), gpt2 is GPT-2 small's usual serving shape
GENERATION = {"small": (64, 32), "gpt2": (128, 128)}
GENERATION_BATCH_SIZES = (1, 4, 16)   # one case each: the throughput-latency trade-off


def generation_lengths(spec: Any, options: dict[str, Any]) -> tuple[int, int]:
    """(prompt_len, new_tokens) of a generation case: the options, else the preset's ``GENERATION``
    (the prompt cut to the context). Both positive ints, new_tokens >= 2 (a prefill and a decode step),
    and prompt_len + new_tokens - 1 within the context; else UserError."""
    default_prompt, default_new = GENERATION.get(spec.preset, GENERATION["small"])
    lengths = {"prompt_len": options.get("prompt_len", min(default_prompt, spec.block_size // 2)),
               "new_tokens": options.get("new_tokens", max(2, min(default_new, spec.block_size // 2)))}
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
