"""The MLX-LM model of a case and its timing.

Load (``load``): ``mlx_lm.utils.load_model`` reads the checkpoint folder (config.json and safetensors); the
weights are cast to the format's dtype (``model.set_dtype``), or, for int8 and int4, cast to bf16 (the
compute dtype the workload's bandwidth bound counts) and quantised by ``mlx_lm.utils.quantize_model``, what
``mlx_lm.convert -q`` runs: MLX's affine quantisation, a scale and a bias per group, a layer whose rows the
group does not tile left as it is (MLX-LM's own rule). What the loaded model holds is recorded: its bytes
(every parameter, quantised ones as stored) and the dtypes found.

A round (``bench``): ``mlx_lm.generate.generate_step`` over ``prompt_len`` random token ids for
``new_tokens`` tokens, greedy (its default sampler, argmax), on a stream of the case's device. It hands
back each token as a host integer once it exists (``.item()``), while the next step is already queued
(MLX-LM's own pipelining, as every MLX-LM user runs it): the clock is read before the call and at each
token, the first stamp the prefill (TTFT), the gaps after it the decode steps. With ``depth`` D, a KV
cache is filled with D tokens once, untimed, and each round generates after it, then trims what it added
(``trim_prompt_cache``), so every round starts from the same D cached tokens. Rounds as the generation
loop's (harness/generation.py): one untimed first round, one warm-up, then timed rounds until the budget.
"""

from __future__ import annotations

import contextlib
import io
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xpubench.backends.base import Unsupported
from xpubench.devices.device import MPS, kind_of
from xpubench.workloads.base import Weights

INT8_GROUP = 64   # mlx_lm.convert's default group size


@dataclass
class MlxModel:
    model: Any
    device: Any
    vocab_size: int
    facts: dict[str, Any] = field(default_factory=dict)


def device_of(device: str):
    """xpubench's device id -> MLX's: ``cpu`` -> mx.cpu, ``mps`` (the Apple GPU) -> mx.gpu (Metal)."""
    import mlx.core as mx

    if kind_of(device) is MPS:
        if not mx.metal.is_available():
            raise Unsupported("MLX finds no Metal device here: the Apple GPU (mps) is not available")
        return mx.Device(mx.gpu)
    return mx.Device(mx.cpu)


def load(weights: Weights, fmt: str, device: str) -> MlxModel:
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.utils import load_model, quantize_model

    where = device_of(device)
    mx.set_default_device(where)
    model, config = load_model(weights.folder)
    dtype = {"fp32": mx.float32, "bf16": mx.bfloat16, "fp16": mx.float16}.get(fmt, mx.bfloat16)
    model.set_dtype(dtype)
    method = None
    if fmt in ("int8", "int4"):
        bits, group = (8, INT8_GROUP) if fmt == "int8" else (4, weights.int4_group)
        with contextlib.redirect_stdout(io.StringIO()):   # its "[INFO] Quantized model with ... bits per weight."
            model, _ = quantize_model(model, config, group, bits)
        method = (f"MLX affine {bits}-bit weights in groups of {group} (a bf16 scale and bias per group), by "
                  "mlx_lm.utils.quantize_model as mlx_lm.convert -q makes them")
    params = tree_flatten(model.parameters())
    mx.eval([p for _, p in params])
    kinds: dict[str, int] = {}
    for _, p in params:
        kinds[str(p.dtype).removeprefix("mlx.core.")] = kinds.get(str(p.dtype).removeprefix("mlx.core."), 0) + 1
    facts = {"weight_format": {"int8": "q8 affine", "int4": "q4 affine"}.get(fmt, str(dtype).removeprefix("mlx.core.")),
             "int8_method": method, "weight_bytes": sum(p.nbytes for _, p in params),
             "runtime_build": f"MLX {mx.__version__}, MLX-LM {_version('mlx-lm')} on {where}",
             "engine_settings": ", ".join(f"{n} {t}" for t, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
                                + " tensors",
             "kv_cache_na": "MLX-LM does not report it"}
    return MlxModel(model, where, weights.config["vocab_size"], {k: v for k, v in facts.items() if v is not None})


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def bench(model: MlxModel, prompt_len: int, new_tokens: int, depth: int, budget_s: float | None,
          clock=time.perf_counter) -> tuple[dict, dict]:
    import mlx.core as mx
    from mlx_lm.generate import generate_step
    from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

    from xpubench.harness.generation import round_figures, timed_rounds, warm_up

    rng = np.random.default_rng(0)
    prompt = mx.array(rng.integers(0, model.vocab_size, prompt_len, dtype=np.int32))
    stream = mx.new_stream(model.device)
    cache = make_prompt_cache(model.model)
    if depth:   # untimed, once: the cache's first D positions
        model.model(mx.array(rng.integers(0, model.vocab_size, (1, depth), dtype=np.int32)), cache=cache)
        mx.eval([c.state for c in cache])

    def one_round() -> tuple[float, list[float]]:
        stamps = []
        t0 = clock()
        for _ in generate_step(prompt, model.model, stream, max_tokens=new_tokens, prompt_cache=cache):
            stamps.append(clock())
        trim_prompt_cache(cache, cache[0].offset - depth)
        if len(stamps) != new_tokens:
            raise RuntimeError(f"MLX-LM generated {len(stamps)} tokens of the {new_tokens} asked for")
        return stamps[0] - t0, list(np.diff(stamps))

    first_round_s = warm_up(one_round, clock)
    prefills, rounds = timed_rounds(one_round, budget_s, clock)
    metrics = {"compile_s": None, "first_round_s": first_round_s,
               **round_figures(1, prompt_len, new_tokens, prefills, rounds), **model.facts,
               "runtime_tests": f"generate_step: {prompt_len} prompt ids after {depth} cached, {new_tokens} new tokens "
                                "(greedy, batch 1)"}
    return metrics, {"prefill_s": prefills, "decode_token_s": [t for steps in rounds for t in steps]}
