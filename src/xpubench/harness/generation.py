"""The generation measurement (greedy decoding with a KV cache), the same for every framework.

A Generator (``backends/*/generate.py``) holds the model, a prompt batch of ``batch`` x ``prompt_len``
token ids already on the device, and a KV cache allocated once for ``prompt_len + new_tokens`` positions.
One *round* generates ``new_tokens`` tokens per sequence: a prefill (the whole prompt in one call,
which yields the first token) then ``new_tokens - 1`` decode steps (one token per sequence per call,
fed the previous token and the cache).

Timed regions (see docs/workloads.md, "GPT"):
- ``compile_s``: ahead-of-time compilation of prefill and decode (jax.jit lower+compile); None for
  eager PyTorch.
- ``first_round_s``: the first round, untimed in the samples (kernel selection, allocator growth, lazy
  initialisation). Then ``WARMUP_ROUNDS`` more rounds, not timed.
- ``prefill_s`` (samples, one per round): from the prefill call until the first token exists on the
  device (the generator's sync). This is the time to first token (TTFT) of the whole batch, with the
  prompt already on the device (no tokenisation, no host transfer).
- ``decode_token_s`` (samples, ``new_tokens - 1`` per round): one decode step, from the call until its
  token exists on the device. Every step is synchronised, as in a serving loop that streams each token
  or checks a stop condition: the host never queues step k+1 while the device runs step k.
Derived: ``prefill_tokens_per_s`` = batch x prompt_len / median prefill; ``decode_token_s`` = the
median over rounds of a round's mean step (its decode time / its steps: stalls included, as in a
throughput), ``decode_tokens_per_s`` = batch / decode_token_s (the statistic a case folds, compares and
shows: docs/methodology.md); ``decode_token_p50_s`` / ``p90`` per-token latency of single steps;
``tokens_per_s`` = batch x new_tokens / median round (prefill + decode).

Energy (energy/windows.py), where the device has a readable counter (RAPL, NVML, AMD SMI): read around
every timed prefill and, apart, around every timed round's decode steps (the synchronised steps, the
same region as ``decode_token_s``), then ``prefill_joules_per_token`` / ``decode_joules_per_token``
over the tokens those regions made. Before the rounds the idle device is read for ``IDLE_S`` seconds
(``idle_watts``); ``*_net_joules_per_token`` subtract idle_watts x the region's seconds (the energy the
work added). Without a counter the figures are n/a with the meter's reason (``energy_na``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, Protocol

import numpy as np

from xpubench.energy.meter import Unavailable
from xpubench.energy.windows import EnergyWindows, meter_for_case
from xpubench.results.outcome import Outcome
from xpubench.results.stats import named_warnings, summarize

DEFAULT_BUDGET_S = 10.0   # measurement time after the warm-up, when the case gives no budget
IDLE_S = 1.0              # the idle device's power, read before the rounds where a counter exists
WARMUP_ROUNDS = 1
ROUNDS = (2, 20)          # at least, at most (5 wanted for a spread of the prefill times)


class Generator(Protocol):
    batch: int
    prompt_len: int
    new_tokens: int                                  # tokens generated per sequence per round, >= 2
    prompt: Any                                      # (batch, prompt_len) int ids on the device

    def compile(self) -> float | None: ...           # seconds of AOT compile, or None
    def prefill(self, prompt: Any) -> tuple[Any, Any]: ...            # -> (cache, first token (batch,))
    def decode(self, cache: Any, token: Any) -> tuple[Any, Any]: ...  # -> (cache, next token (batch,))
    def sync(self, token: Any) -> None: ...          # wait until that token exists on the device
    def host(self, token: Any) -> np.ndarray: ...    # a token handle as numpy int (batch,)
    # optional: info() -> dict of untimed facts to record (e.g. the attention kernels that ran)


def cache_positions(block_size: int, prompt_len: int, new_tokens: int) -> int:
    """Positions a KV cache needs for one round: the prompt and every generated token but the last
    (it is never fed back). More than the model's context (``block_size``) is a ValueError."""
    positions = prompt_len + new_tokens - 1
    if positions > block_size:
        raise ValueError(f"prompt {prompt_len} + {new_tokens} new tokens need {positions} positions; "
                         f"the context is {block_size}")
    return positions


def generate(gen: Generator) -> np.ndarray:
    """Untimed: one greedy round, the tokens as numpy (batch, new_tokens)."""
    cache, token = gen.prefill(gen.prompt)
    tokens = [gen.host(token)]
    for _ in range(gen.new_tokens - 1):
        cache, token = gen.decode(cache, token)
        tokens.append(gen.host(token))
    return np.stack(tokens, axis=1)


def _round(gen: Generator, clock: Callable[[], float], energy: tuple | None = None) -> tuple[float, list[float]]:
    """One synchronised round: (prefill seconds, [seconds of each decode step]); ``energy``: the
    (prefill, decode) EnergyWindows read around the prefill and around the decode steps."""
    windows = energy or (None, None)
    with _window(windows[0]):
        t0 = clock()
        cache, token = gen.prefill(gen.prompt)
        gen.sync(token)
        prefill = clock() - t0
    steps = []
    with _window(windows[1]):
        for _ in range(gen.new_tokens - 1):
            t0 = clock()
            cache, token = gen.decode(cache, token)
            gen.sync(token)
            steps.append(clock() - t0)
    return prefill, steps


def _window(windows):
    return nullcontext() if windows is None else windows.window()


def idle_watts(meter, seconds: float = IDLE_S) -> float | None:
    """The device's power doing nothing for ``seconds`` (None where the meter cannot be read: asked
    once without waiting first)."""
    meter.start()
    if meter.stop().joules is None:
        return None
    meter.start()
    time.sleep(seconds)
    reading = meter.stop()
    return reading.watts if reading.joules is not None else None


def energy_per_token(windows: tuple, tokens: tuple[int, int], idle: float | None) -> dict:
    """J/token of the prefills and of the decode steps, raw and with the idle power taken out; n/a with
    the meter's reason where it could not be read."""
    out: dict = {}
    for name, win, count in (("prefill", windows[0], tokens[0]), ("decode", windows[1], tokens[1])):
        reading = win.total()
        if reading.joules is None:
            out["energy_na"] = f"n/a: {reading.reason}"
            continue
        out[f"{name}_joules_per_token"] = reading.joules / count
        if idle is not None and reading.seconds:
            out[f"{name}_net_joules_per_token"] = (reading.joules - idle * reading.seconds) / count
        out["energy_source"] = reading.source
    if idle is not None:
        out["idle_watts"] = idle
    return out


def measure(gen: Generator, budget_s: float | None = None,
            clock: Callable[[], float] = time.perf_counter, meter=None) -> tuple[dict, dict]:
    """Run the timed regions (module docstring); returns (metrics, raw samples). ``meter``: the case's
    energy meter (None: energy not read)."""
    if gen.new_tokens < 2:
        raise ValueError(f"generation needs at least 2 new tokens (a prefill and a decode step), "
                         f"got {gen.new_tokens}")
    compile_s = gen.compile()
    first_round_s = warm_up(lambda: _round(gen, clock), clock)
    meter = meter or Unavailable("no energy meter was given")
    idle = idle_watts(meter)
    windows = (EnergyWindows(meter), EnergyWindows(meter))
    prefills, rounds = timed_rounds(lambda: _round(gen, clock, windows), budget_s, clock)
    decode = [t for steps in rounds for t in steps]
    metrics = {
        "compile_s": compile_s,
        "first_round_s": first_round_s,
        **round_figures(gen.batch, gen.prompt_len, gen.new_tokens, prefills, rounds),
        **energy_per_token(windows, (gen.batch * gen.prompt_len * len(prefills), gen.batch * len(decode)), idle),
    }
    info = getattr(gen, "info", None)
    if info is not None:
        metrics.update(info())
    return metrics, {"prefill_s": prefills, "decode_token_s": decode}


def warm_up(one_round: Callable[[], Any], clock: Callable[[], float]) -> float:
    """The first round's seconds (kernel selection, allocator growth, lazy initialisation), then
    ``WARMUP_ROUNDS`` more, none of them in the samples."""
    t0 = clock()
    one_round()
    first_round_s = clock() - t0
    for _ in range(WARMUP_ROUNDS):
        one_round()
    return first_round_s


def timed_rounds(one_round: Callable[[], tuple[float, list[float]]], budget_s: float | None,
                 clock: Callable[[], float]) -> tuple[list[float], list[list[float]]]:
    """(prefill seconds, [decode step seconds]) of each timed round: at least ``ROUNDS[0]``, at most
    ``ROUNDS[1]``, until the budget is spent (or half of it with 5 rounds); ``one_round`` times one (this
    loop's ``_round``, or an engine's own: backends/openvino_, backends/mlx_)."""
    budget = budget_s or DEFAULT_BUDGET_S
    begin = clock()
    prefills: list[float] = []
    rounds: list[list[float]] = []
    while len(prefills) < ROUNDS[1]:
        elapsed = clock() - begin
        if len(prefills) >= ROUNDS[0] and (elapsed > budget or len(prefills) >= 5 and elapsed > 0.5 * budget):
            break
        prefill, steps = one_round()
        prefills.append(prefill)
        rounds.append(steps)
    return prefills, rounds


def round_figures(batch: int, prompt_len: int, new_tokens: int, prefills: list[float],
                  rounds: list[list[float]]) -> dict:
    """The figures of timed rounds (module docstring, "Derived"), named as every generation result names them."""
    decode = [t for steps in rounds for t in steps]
    pre, dec, step = summarize(prefills), summarize(decode), summarize([sum(s) / len(s) for s in rounds])
    round_s = summarize([p + sum(steps) for p, steps in zip(prefills, rounds)])
    return {
        "batch": batch,
        "prompt_len": prompt_len,
        "new_tokens": new_tokens,
        "rounds": len(prefills),
        "ttft_s": pre.median,
        "ttft_p90_s": pre.p90,
        "prefill_tokens_per_s": batch * prompt_len / pre.median,
        "decode_token_p50_s": dec.median,
        "decode_token_p90_s": dec.p90,
        "decode_token_cv": dec.cv,
        "decode_token_s": step.median,
        "decode_token_ci95_low_s": step.ci95_low,
        "decode_token_ci95_high_s": step.ci95_high,
        "decode_tokens_per_s": batch / step.median,
        "tokens_per_s": batch * new_tokens / round_s.median,
        "prefill_tokens_per_s_sd": _sd([batch * prompt_len / p for p in prefills]),
        "decode_tokens_per_s_sd": _sd([batch * len(steps) / sum(steps) for steps in rounds]),
        "warning": named_warnings({"prefill": pre, "decode": dec}),
    }


def _sd(values: list[float]) -> float | None:
    """The sample standard deviation (llama-bench's ± over its repetitions); None for fewer than two."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else None


def prompt_tokens(vocab: int, batch: int, prompt_len: int, seed: int) -> np.ndarray:
    """The prompt batch: (batch, prompt_len) int32 ids drawn uniformly with the case's seed (decoding
    speed does not depend on the prompt's content, only on its length)."""
    return np.random.default_rng(seed).integers(0, vocab, (batch, prompt_len), dtype=np.int32)


def run_generation(case, gen: Generator, clock: Callable[[], float] = time.perf_counter,
                   gpu_identity=None) -> Outcome:
    """The case's generation measured (``measure``), with the workload's counts (``add_counts``)."""
    metrics, samples = measure(gen, case.time_budget_s, clock, meter_for_case(case, gpu_identity))
    add_counts(metrics, case, gen.batch, gen.prompt_len, gen.new_tokens)
    return Outcome(metrics=metrics, samples=samples)


def add_counts(metrics: dict, case, batch: int, prompt_len: int, new_tokens: int) -> None:
    """Add the workload's analytic counts of a generation case to its measured ``metrics`` (its own loop's
    or an engine's: harness/engine.py): ``generation_counts`` (llama: prefill FLOPs, bytes read per generated
    token; a figure the runtime reported itself wins), and the decode FLOP rate, the workload's
    ``decode_flops_per_token(spec, context)`` at the mean context of the decode steps (positions prompt_len +
    1 .. prompt_len + new_tokens - 1 attended to) times decode tokens/s; the runner turns it into MFU
    against the chip's peak (n/a where the peak is unknown); analysis/generation.py derives pp MFU and the
    share of the bandwidth bound on load."""
    from xpubench.workloads import get_workload

    workload = get_workload(case.workload)
    spec = workload.spec_for(case.options)
    if workload.generation_counts is not None:   # prefill FLOPs, bytes per generated token (llama)
        counts = workload.generation_counts(spec, batch, prompt_len, new_tokens, case.precision)
        metrics.update({k: v for k, v in counts.items() if metrics.get(k) is None})   # what the runtime saw wins
    if workload.decode_flops_per_token is not None:
        per_token = workload.decode_flops_per_token(spec, prompt_len + new_tokens / 2)
        metrics["flops_per_sample"] = per_token
        metrics["achieved_flops_per_s"] = per_token * metrics["decode_tokens_per_s"]
    metrics["prefill_s"] = metrics["ttft_s"]
