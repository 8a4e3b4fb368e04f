"""OpenVINO GenAI's ``LLMPipeline`` timed by itself and by xpubench on the same calls.

The model (convert.py's folder) is loaded on the CPU with the format's precision asked for both the
computation and the KV cache (``PRECISION``: fp32 in f32; bf16, int8 and int4 in bf16, as the workload's
bandwidth bound counts them: OpenVINO's own defaults, bf16 where the CPU has it and a u8 KV cache, would
count fewer bytes than the bound does), with this process's usable cores as its threads. What the
compiled model reports is recorded (``engine_settings``): on a CPU without bf16 OpenVINO computes in f32.

A round is one ``generate`` call of ``prompt_len`` random token ids (no tokenizer: the ids are the input)
producing exactly ``new_tokens`` tokens (``min_new_tokens``, end of sequence ignored), greedy. xpubench's
clock: ``time.perf_counter`` before the call and at each token the pipeline hands its streamer; the
first token's stamp is the prefill (TTFT), the gaps after it the decode steps (the streamer's Python
call is inside them: that is the harness's overhead, benchmarks/llm_runtimes.py prints its ratio). The
pipeline's own figures of the same call (``perf_metrics``: TTFT, TPOT, throughput) are recorded beside
them (``engine_*``, the median over the timed rounds). Rounds as the generation loop's: one untimed
first round, one warm-up, then timed rounds until the case's budget (harness/generation.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xpubench.backends.engine import usable_threads

PRECISION = {"fp32": "f32", "bf16": "bf16", "int8": "bf16", "int4": "bf16"}
FORMAT_NOTES = {
    "int8": "OpenVINO INT8_ASYM weight compression by NNCF (8-bit weights, a scale and zero point per output "
            "channel), decompressed in the matmuls; activations quantised dynamically by the CPU plugin",
    "int4": "OpenVINO INT4_ASYM weight compression by NNCF (4-bit weights, a scale and zero point per group; the "
            "embedding and head in INT8_ASYM), decompressed in the matmuls",
}


@dataclass
class OpenVinoModel:
    """The loaded pipeline and the facts a result records of it."""

    pipe: Any
    vocab_size: int
    threads: int
    facts: dict[str, Any] = field(default_factory=dict)


def load(folder: Path, fmt: str, vocab_size: int, cached: bool) -> OpenVinoModel:
    """``LLMPipeline`` of the converted ``folder`` (module docstring); the settings read back from a
    compiled copy of the same model with the same configuration."""
    import openvino as ov
    import openvino_genai

    threads = usable_threads()
    config = {"INFERENCE_PRECISION_HINT": PRECISION[fmt], "KV_CACHE_PRECISION": PRECISION[fmt],
              "INFERENCE_NUM_THREADS": threads}
    pipe = openvino_genai.LLMPipeline(str(folder), "CPU", **config)
    compiled = ov.Core().compile_model(str(folder / "openvino_model.xml"), "CPU", config)
    said = {key: _text(compiled.get_property(key)) for key in
            ("INFERENCE_PRECISION_HINT", "KV_CACHE_PRECISION", "DYNAMIC_QUANTIZATION_GROUP_SIZE")}
    del compiled
    weights = (folder / "openvino_model.bin").stat().st_size
    facts = {
        "weight_format": {"fp32": "f32", "bf16": "bf16", "int8": "int8_asym", "int4": "int4_asym"}[fmt],
        "int8_method": FORMAT_NOTES.get(fmt),
        "threads": threads, "model_bytes": weights,
        "runtime_build": f"OpenVINO GenAI {openvino_genai.__version__} (OpenVINO {ov.__version__})",
        "engine_settings": ", ".join(f"{k} {v}" for k, v in said.items())
                           + f" ({folder.name}, {'cached' if cached else 'converted for this case'})",
        "kv_cache_na": "OpenVINO GenAI does not report it",
    }
    return OpenVinoModel(pipe, vocab_size, threads, {k: v for k, v in facts.items() if v is not None})


def _text(value) -> str:
    """A property as OpenVINO names it (an element type: ``f32``, ``bf16``)."""
    return value.get_type_name() if hasattr(value, "get_type_name") else str(value)


def bench(model: OpenVinoModel, prompt_len: int, new_tokens: int, budget_s: float | None,
          clock=time.perf_counter) -> tuple[dict, dict]:
    """(metrics, raw samples) of the rounds (module docstring)."""
    import openvino as ov
    import openvino_genai

    from xpubench.harness.generation import round_figures, timed_rounds, warm_up

    rng = np.random.default_rng(0)   # a new prompt every round (``one_round``)
    config = model.pipe.get_generation_config()
    config.max_new_tokens = config.min_new_tokens = new_tokens
    config.ignore_eos, config.do_sample = True, False
    config.eos_token_id, config.stop_token_ids = 0, {0}   # a valid id (none without a tokenizer); ignored
    stamps: list[float] = []
    own: list[tuple[float, float, float]] = []

    class Stamps(openvino_genai.StreamerBase):
        def write(self, token):
            stamps.append(clock())
            return openvino_genai.StreamingStatus.RUNNING

        def end(self):
            pass

    streamer = Stamps()

    def one_round() -> tuple[float, list[float]]:
        # the pipeline keeps the last call's KV cache and reuses a repeated prompt's prefix (the same 512 ids
        # again: a 2.7 ms prefill against 39 ms), so every round gets new ids; ``prompt`` holds the array the
        # tensor shares its memory with for the whole call
        prompt = rng.integers(0, model.vocab_size, (1, prompt_len), dtype=np.int64)
        ids = ov.Tensor(prompt)
        stamps.clear()
        t0 = clock()
        result = model.pipe.generate(ids, config, streamer)
        if len(stamps) != new_tokens:
            raise RuntimeError(f"OpenVINO GenAI streamed {len(stamps)} tokens of the {new_tokens} asked for")
        perf = result.perf_metrics
        own.append((perf.get_ttft().mean / 1e3, perf.get_tpot().mean / 1e3, perf.get_throughput().mean))
        return stamps[0] - t0, list(np.diff(stamps))

    first_round_s = warm_up(one_round, clock)
    prefills, rounds = timed_rounds(one_round, budget_s, clock)
    ttft, tpot, throughput = (float(np.median(column)) for column in zip(*own[-len(prefills):]))
    metrics = {"compile_s": None, "first_round_s": first_round_s,
               **round_figures(1, prompt_len, new_tokens, prefills, rounds), **model.facts,
               "engine_ttft_s": ttft, "engine_decode_token_s": tpot, "engine_decode_tokens_per_s": 1 / tpot,
               "engine_tokens_per_s": throughput,
               "runtime_tests": f"generate: {prompt_len} prompt ids, {new_tokens} new tokens (greedy, batch 1)"}
    return metrics, {"prefill_s": prefills, "decode_token_s": [t for steps in rounds for t in steps]}
