"""A generation result's facts about the engine that produced it (backends/engine.py: llama.cpp's llama-bench,
OpenVINO GenAI, MLX-LM), which loads its own model and times the case itself: the model's size and
parameters as it loaded them, the threads it computed with, the tests it ran and the build that ran them,
how long loading (and converting) took, and the engine's own figures of the same calls where it reports
them beside xpubench's clock (OpenVINO GenAI's perf metrics). All optional: torch and JAX cases leave them
out (``params`` and ``model_bytes`` may also come from the workload's counts: the same names, the same
units)."""

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
    load_s: float | None = figure("s", "the engine's model made ready before any timing: converted to the format "
                                       "(where its cache had none) and loaded", optional=True)
    engine_ttft_s: float | None = figure("s", "the engine's own time to first token of the timed calls (OpenVINO "
                                              "GenAI's perf_metrics TTFT, median over rounds)", optional=True)
    engine_decode_token_s: float | None = figure("s", "the engine's own time per output token of the same calls "
                                                      "(OpenVINO GenAI's TPOT, median over rounds)", optional=True)
    engine_decode_tokens_per_s: float | None = figure("1/s", "1 / engine_decode_token_s: the engine's own tg",
                                                      optional=True)
    engine_tokens_per_s: float | None = figure("1/s", "the engine's own throughput of the same calls (OpenVINO "
                                                      "GenAI's, median over rounds)", optional=True)
    engine_settings: str | None = figure("text", "what the engine was asked to compute in and found (OpenVINO: the "
                                                 "inference and KV cache precisions read back)", optional=True)
    gguf_types: str | None = figure("text", "the GGUF file's tensor types and counts (llama-quantize keeps some "
                                            "tensors in other types)", optional=True)
