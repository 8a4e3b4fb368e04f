"""A generation result's facts about the runtime that produced it, where that runtime is not the Python
framework itself: llama.cpp's llama-bench (backends/llamacpp_/) times the case with its own clock and
reports the model's size and parameters as it loaded them, the threads it computed with, the tests it ran
and the build that ran them. All optional: torch and JAX cases leave them out (``params`` and
``model_bytes`` may also come from the workload's counts: the same names, the same units)."""

from __future__ import annotations

from dataclasses import dataclass

from xpubench.results.metric_base import Metrics, figure


@dataclass
class RuntimeFacts(Metrics):
    threads: int | None = figure("count", "CPU threads the runtime computed with (llama-bench's -t)", optional=True)
    params: int | None = figure("count", "the model's parameters (llama-bench's params column)", optional=True)
    model_bytes: int | None = figure("B", "the model's weights in bytes (llama-bench's size column: the GGUF's "
                                          "tensors)", optional=True)
    runtime_build: str | None = figure("text", "the runtime's build (llama.cpp: its commit and build number)",
                                       optional=True)
    runtime_tests: str | None = figure("text", "what the runtime was asked to time (llama-bench's tests: pp P @ "
                                               "depth, tg N @ depth; the KV cache's types)", optional=True)
    kv_cache_na: str | None = figure("text", "why the KV cache's size is n/a (llama-bench does not report it)",
                                     optional=True)
    gguf_types: str | None = figure("text", "the GGUF file's tensor types and counts (llama-quantize keeps some "
                                            "tensors in other types)", optional=True)
