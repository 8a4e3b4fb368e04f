"""A serving point's figures (``xpubench serve``, src/xpubench/serve/; docs/serving.md): one sweep point of
a load generator against an OpenAI-compatible server, at one concurrency (closed loop) or request rate
(open loop). Latencies are the client's clock around streamed requests; the definitions follow vLLM's
``vllm bench serve`` and NVIDIA AIPerf (docs/serving.md says where the two differ). The raw per-request
samples are the result's ``samples`` (``ttft_s``, ``tpot_s``, ``e2e_s``, ``itl_s``) and
``artifacts["requests"]``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xpubench.results.metric_base import figure
from xpubench.results.metrics_common import Common


@dataclass
class ServeMetrics(Common):
    """One sweep point (serve/figures.py fills it)."""

    GROUP: ClassVar[str] = "serve"
    load: str | None = figure("text", "closed loop (N users, each sends when its answer ended) or poisson (open "
                                      "loop, Poisson arrivals at a rate)")
    concurrency: int | None = figure("count", "closed loop: users; open loop: the cap on requests in flight")
    request_rate: float | None = figure("1/s", "open loop: the asked arrival rate (requests/s)", optional=True)
    input_len: int | None = figure("count", "prompt tokens asked per request")
    output_len: int | None = figure("count", "max_tokens asked per request")
    endpoint: str | None = figure("text", "the API path the requests went to (/v1/completions, /v1/chat/completions)")
    requests: int | None = figure("count", "measured requests sent (warm-up not counted)")
    warmup_requests: int | None = figure("count", "requests sent before the measurement and discarded")
    completed: int | None = figure("count", "measured requests that ended with their answer")
    failed: int | None = figure("count", "measured requests that ended in an error (timeouts included)")
    timeouts: int | None = figure("count", "measured requests cut by the per-request or per-point time limit")
    failure_reasons: str | None = figure("text", "each failure reason with its count", optional=True)
    point_s: float | None = figure("s", "the point's measured window: first measured send to last measured end")
    ttft_s: float | None = figure("s", "time to first token: request sent until the first chunk with text (median)")
    tpot_s: float | None = figure("s", "time per output token of a request: (E2E - TTFT) / (output tokens - 1) "
                                       "(median over requests; AIPerf calls it inter-token latency)")
    itl_s: float | None = figure("s", "inter-token latency: the gap between two consecutive streamed chunks, all "
                                      "requests' gaps pooled (median; vLLM's ITL, AIPerf's inter-chunk latency)")
    e2e_s: float | None = figure("s", "end-to-end latency: request sent until its last byte (median)")
    e2e_ci95_low_s: float | None = figure("s", "95% interval of e2e_s, low end")
    e2e_ci95_high_s: float | None = figure("s", "95% interval of e2e_s, high end")
    ttft_p50_s: float | None = figure("s", "TTFT, median")
    ttft_p90_s: float | None = figure("s", "TTFT, 90th percentile")
    ttft_p99_s: float | None = figure("s", "TTFT, 99th percentile")
    ttft_mean_s: float | None = figure("s", "TTFT, mean")
    tpot_p50_s: float | None = figure("s", "TPOT, median")
    tpot_p90_s: float | None = figure("s", "TPOT, 90th percentile")
    tpot_p99_s: float | None = figure("s", "TPOT, 99th percentile")
    tpot_mean_s: float | None = figure("s", "TPOT, mean")
    itl_p50_s: float | None = figure("s", "ITL, median")
    itl_p90_s: float | None = figure("s", "ITL, 90th percentile")
    itl_p99_s: float | None = figure("s", "ITL, 99th percentile")
    itl_mean_s: float | None = figure("s", "ITL, mean")
    e2e_p50_s: float | None = figure("s", "E2E latency, median")
    e2e_p90_s: float | None = figure("s", "E2E latency, 90th percentile")
    e2e_p99_s: float | None = figure("s", "E2E latency, 99th percentile")
    e2e_mean_s: float | None = figure("s", "E2E latency, mean")
    output_tokens_per_s: float | None = figure("1/s", "output tokens of the completed requests / point_s")
    total_tokens_per_s: float | None = figure("1/s", "input and output tokens of the completed requests / point_s")
    requests_per_s: float | None = figure("1/s", "completed requests / point_s")
    user_tokens_per_s: float | None = figure("1/s", "one user's output tokens/s once the answer streams: median over "
                                                    "requests of 1 / TPOT (AIPerf's output token throughput per "
                                                    "user; the wait for the first token left out)")
    user_e2e_tokens_per_s: float | None = figure("1/s", "one user's output tokens/s, the wait for the first token "
                                                        "included: the completed requests' output tokens / the sum of "
                                                        "their E2E (at 1 user: output_tokens_per_s less the client's "
                                                        "idle time between requests)", optional=True)
    mean_input_tokens: float | None = figure("count", "input tokens per completed request (usage, else asked)")
    mean_output_tokens: float | None = figure("count", "output tokens per completed request")
    tokens_counted: str | None = figure("text", "where output token counts came from: the usage field, or the "
                                                "stream's chunks where the server sent no usage")
    slo: str | None = figure("text", "the service-level objective asked (--slo)", optional=True)
    slo_attained: float | None = figure("ratio", "share of the measured requests that met every SLO (failures "
                                                 "count as missed)", optional=True)
    goodput_requests_per_s: float | None = figure("1/s", "requests that met every SLO / point_s (vLLM's goodput)",
                                                  optional=True)
    goodput_tokens_per_s: float | None = figure("1/s", "output tokens of those requests / point_s", optional=True)
    usd_per_hour: float | None = figure("USD", "the price given for the server (--price)", optional=True)
    usd_per_1m_output_tokens: float | None = figure("USD", "usd_per_hour / (output_tokens_per_s x 3600) x 1e6",
                                                    optional=True)
    server: str | None = figure("text", "the server that answered: its name and version as it said")
    model: str | None = figure("text", "the model the server served (its /v1/models id)")
    server_command: str | None = figure("text", "the command xpubench started the server with", optional=True)
    # the server's own figures over the measured window (serve/telemetry.py: its Prometheus /metrics)
    server_running_mean: float | None = figure("count", "requests the server was processing, mean of its readings "
                                                        "(llama-server requests_processing, vLLM num_requests_running, "
                                                        "SGLang num_running_reqs)", optional=True)
    server_running_max: float | None = figure("count", "requests the server was processing, largest reading",
                                              optional=True)
    server_waiting_mean: float | None = figure("count", "requests queued for a slot, mean of its readings "
                                                        "(requests_deferred, num_requests_waiting, num_queue_reqs)",
                                               optional=True)
    server_waiting_max: float | None = figure("count", "requests queued for a slot, largest reading", optional=True)
    server_kv_cache_mean: float | None = figure("ratio", "share of the server's KV cache in use, mean of its "
                                                         "readings (vLLM kv_cache_usage_perc, SGLang token_usage)",
                                                optional=True)
    server_kv_cache_max: float | None = figure("ratio", "share of the server's KV cache in use, largest reading",
                                               optional=True)
    server_prompt_tokens: float | None = figure("count", "prompt tokens the server counted over the window "
                                                         "(its counter, end less start)", optional=True)
    server_output_tokens: float | None = figure("count", "output tokens the server counted over the window "
                                                         "(its counter, end less start)", optional=True)
    server_metrics: str | None = figure("text", "how the server's metrics were read: readings, what it does not "
                                                "expose, or why there are none", optional=True)
    interrupted: bool | None = figure("flag", "Ctrl-C ended the point early: its figures are of the requests "
                                              "finished by then", optional=True)
