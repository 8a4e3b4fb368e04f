"""A case's model for llama-bench: the GGUF of the weights in the case's format (written or taken from the
cache, untimed) and what the result records of it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xpubench.backends.base import Unsupported
from xpubench.backends.engine import usable_threads
from xpubench.backends.llamacpp_.binaries import find
from xpubench.backends.llamacpp_.gguf_file import FORMAT_NOTES, GGUF_TYPES, gguf_for, tensor_summary
from xpubench.workloads.base import Weights


@dataclass(frozen=True)
class GgufModel:
    """What llama-bench loads: the program, the GGUF, and the facts a result records of them."""

    bench: Path
    path: Path
    facts: dict[str, Any]


def gguf_model(weights: Weights, fmt: str) -> GgufModel:
    """The model of ``weights`` in ``fmt`` (a key of GGUF_TYPES, e.g. "q4_K_M" as well as the precisions:
    benchmarks/llm_runtimes.py)."""
    programs = find()
    if programs.bench is None:
        raise Unsupported(f"llama.cpp: {programs.missing}")
    path, cached = gguf_for(weights, fmt, programs.quantize, usable_threads())
    summary = tensor_summary(path)
    facts = {
        "weight_format": GGUF_TYPES[fmt][0].lower(),
        "int8_method": FORMAT_NOTES.get(fmt),
        "gguf_types": ", ".join(f"{n} {t}" for t, n in sorted(summary["types"].items(), key=lambda kv: -kv[1]))
                      + f" ({path.name}, {'cached' if cached else 'written for this case'})",
    }
    return GgufModel(programs.bench, path, {k: v for k, v in facts.items() if v is not None})
