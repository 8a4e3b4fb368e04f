"""The generate mode's figures (results/metrics.py; harness/generation.py fills them): ``GenerateMetrics``,
the generation loop's timings (prefill, time to first token, the decode step, their spread, throughput). It
extends ``LanguageModelGeneration``, a language model's figures beyond the loop's timings: what the worker
records of the model (its weights' and KV cache's bytes as allocated, its weight format, the analytic counts
of a prefill and a decode step) and what analysis/generation.py derives from them on load (pp MFU, the
decode rate as a share of its bandwidth bound), all optional (a workload without the counts, gpt, leaves
them out); and ``RuntimeFacts`` (results/metrics_runtime.py), an engine's own facts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xpubench.results.metric_base import Metrics, figure
from xpubench.results.metrics_common import Common
from xpubench.results.metrics_runtime import RuntimeFacts


@dataclass
class LanguageModelGeneration(Metrics):
    # measured in the worker (backends/*/generate.py OwnCache generators; the workload's generation_counts)
    architecture: str | None = figure("text", "the model's shape by name (llama: the preset, the checkpoint's "
                                              "directory, or the resized preset)", optional=True)
    kv_cache_bytes: int | None = figure("B", "the KV cache as allocated: keys and values for batch x (prompt + "
                                             "new - 1) positions", optional=True)
    weight_bytes: int | None = figure("B", "the model's weights as allocated (int8: values and scales)", optional=True)
    weight_format: str | None = figure("text", "fp32, bf16, fp16, int8 weight-only (per-channel scales) or int4 "
                                               "weight-only (two per byte, a scale and a zero per group)",
                                       optional=True)
    int8_method: str | None = figure("text", "how int8 / int4 weights enter the timed steps", optional=True)
    int4_group_size: int | None = figure("count", "int4: weights per scale and zero point", optional=True)
    params: int | None = figure("count", "the model's parameters, the tied embedding once (llama-bench's params)",
                                optional=True)
    model_bytes: int | None = figure("B", "the weights' bytes in their format, from the shape (llama-bench's size; "
                                          "weight_bytes is what the framework allocated)", optional=True)
    depth: int | None = figure("count", "tokens the KV cache held before each timed prefill and decode (llama-bench's "
                                        "-d)", optional=True)
    threads: int | None = figure("count", "CPU threads the framework computed with (torch.get_num_threads; XLA:CPU: "
                                          "the cores this process may use); none on accelerators", optional=True)
    prefill_tokens_per_s_sd: float | None = figure("1/s", "standard deviation of the rounds' prompt tokens/s",
                                                   optional=True)
    decode_tokens_per_s_sd: float | None = figure("1/s", "standard deviation of the rounds' decode tokens/s",
                                                  optional=True)
    decode_step: str | None = figure("text", "the decode step that ran: eager, or compiled (how)", optional=True)
    matmul_widening: str | None = figure("text", "half-precision matmuls computed in fp32 on a CPU without "
                                                 "instructions for them (which, and why), or None", optional=True)
    prefill_joules_per_token: float | None = figure("J", "energy of the timed prefills / their prompt tokens",
                                                    optional=True)
    decode_joules_per_token: float | None = figure("J", "energy of the timed decode steps / their tokens",
                                                   optional=True)
    prefill_net_joules_per_token: float | None = figure("J", "prefill_joules_per_token less idle_watts x its "
                                                             "time", optional=True)
    decode_net_joules_per_token: float | None = figure("J", "decode_joules_per_token less idle_watts x its time",
                                                       optional=True)
    idle_watts: float | None = figure("W", "the idle device's power, read before the rounds", optional=True)
    compute_precision: str | None = figure("text", "the precision the matmuls compute in (int8 weight-only: the "
                                                   "dequantised dtype); the peak MFU is taken against", optional=True)
    prefill_flops: float | None = figure("FLOP", "analytic FLOPs of one prefill of the batch (causal attention, "
                                                 "the head on the last position)", optional=True)
    decode_bytes_per_token: float | None = figure("B", "analytic bytes a decode step reads per generated token "
                                                       "(weights once per step, each sequence's KV cache) at the "
                                                       "decode steps' mean context", optional=True)
    # derived on load (analysis/generation.py)
    prefill_flops_per_s: float | None = figure("FLOP/s", "prefill_flops / ttft_s", optional=True)
    prefill_mfu: float | None = figure("ratio", "prefill_flops_per_s / the chip's peak at the precision (pp MFU)",
                                       optional=True)
    bound_bandwidth: float | None = figure("B/s", "the memory bandwidth the decode bound uses: measured (xpubench "
                                                  "ceilings) or else the device's spec", optional=True)
    bound_bandwidth_source: str | None = figure("text", "where bound_bandwidth came from", optional=True)
    bandwidth_bound_tokens_per_s: float | None = figure("1/s", "bound_bandwidth / decode_bytes_per_token: the decode "
                                                               "rate that reading only those bytes allows",
                                                       optional=True)
    pct_of_bandwidth_bound: float | None = figure("ratio", "decode_tokens_per_s / bandwidth_bound_tokens_per_s; "
                                                           "never above 1 (see bandwidth_bound_note)", optional=True)
    bandwidth_bound_note: str | None = figure("text", "why the share of the bandwidth bound is n/a (no bandwidth "
                                                      "known; above 100%: the bytes or the bandwidth are wrong)",
                                              optional=True)


@dataclass
class GenerateMetrics(Common, LanguageModelGeneration, RuntimeFacts):
    """Generation with a KV cache (harness/generation.py); a language model's weights, cache and bounds
    (results/metrics_generate.py)."""

    GROUP: ClassVar[str] = "generate"
    compile_s: float | None = figure("s", "ahead-of-time compilation of prefill and decode")
    first_round_s: float | None = figure("s", "the first generation, untimed set-up included")
    batch: int | None = figure("count", "sequences generated together")
    prompt_len: int | None = figure("count", "prompt tokens per sequence")
    new_tokens: int | None = figure("count", "tokens generated per sequence")
    rounds: int | None = figure("count", "generations measured")
    prefill_s: float | None = figure("s", "median prefill of the prompt batch")
    prefill_tokens_per_s: float | None = figure("1/s", "batch x prompt_len / prefill_s")
    ttft_s: float | None = figure("s", "time to first token: median prefill until the first token is ready")
    ttft_p90_s: float | None = figure("s", "90th percentile of ttft")
    decode_token_s: float | None = figure("s", "the decode step (one token per sequence): the median over rounds of "
                                               "a round's mean step")
    decode_token_p50_s: float | None = figure("s", "per-token latency, 50th percentile")
    decode_token_p90_s: float | None = figure("s", "per-token latency, 90th percentile")
    decode_token_cv: float | None = figure("ratio", "coefficient of variation of decode steps")
    decode_token_ci95_low_s: float | None = figure("s", "95% interval of decode_token_s, low end")
    decode_token_ci95_high_s: float | None = figure("s", "95% interval of decode_token_s, high end")
    decode_tokens_per_s: float | None = figure("1/s", "batch / decode_token_s")
    tokens_per_s: float | None = figure("1/s", "generated tokens per second over a whole generation")
    attention_kernel_prefill: str | None = figure("text", "the attention implementation of prefill")
    attention_kernel_decode: str | None = figure("text", "the attention implementation of decode")
    flops_per_sample: float | None = figure("FLOP", "forward FLOPs of one decoded token at the decode steps' "
                                                    "mean context", optional=True)
    achieved_flops_per_s: float | None = figure("FLOP/s", "decode FLOP rate: flops_per_sample x decode_tokens_per_s",
                                                optional=True)
