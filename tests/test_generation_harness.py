"""The generation measuring loop (harness/generation.py) on a fake generator and a fake clock: the
fake's work only 'happens' when the loop synchronises, so a region that forgot to sync measures 0."""

from __future__ import annotations

import numpy as np
import pytest

from xpubench.harness import generation

PREFILL_S, FIRST_PREFILL_S, COMPILE_S = 0.2, 1.0, 7.0
DECODE_S = (0.01, 0.02, 0.03, 0.04)     # step k of a round costs DECODE_S[k % 4]


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeGenerator:
    """Tokens count up from the prompt's last id; device time is charged at sync."""

    def __init__(self, clock: FakeClock, batch: int = 4, prompt_len: int = 16, new_tokens: int = 5) -> None:
        self.clock, self.batch, self.prompt_len, self.new_tokens = clock, batch, prompt_len, new_tokens
        self.prompt = np.arange(batch * prompt_len).reshape(batch, prompt_len)
        self.pending = 0.0
        self.prefills = 0
        self.compiled = False

    def compile(self) -> float:
        self.clock.now += COMPILE_S
        self.compiled = True
        return COMPILE_S

    def prefill(self, prompt):
        assert self.compiled, "compile() comes first"
        self.pending += FIRST_PREFILL_S if self.prefills == 0 else PREFILL_S
        self.prefills += 1
        return {"step": 0}, prompt[:, -1] + 1

    def decode(self, cache, token):
        self.pending += DECODE_S[cache["step"] % len(DECODE_S)]
        return {"step": cache["step"] + 1}, token + 1

    def sync(self, token) -> None:
        self.clock.now += self.pending
        self.pending = 0.0

    def host(self, token) -> np.ndarray:
        return np.asarray(token)

    def info(self) -> dict:
        return {"attention_kernel_decode": "fake"}


def test_timed_regions_hold_finished_work_only() -> None:
    clock = FakeClock()
    gen = FakeGenerator(clock)
    metrics, samples = generation.measure(gen, budget_s=1.0, clock=clock)
    steps = list(DECODE_S)                                        # new_tokens - 1 = 4 steps per round
    assert metrics["compile_s"] == COMPILE_S
    assert metrics["first_round_s"] == pytest.approx(FIRST_PREFILL_S + sum(steps))
    # a round takes 0.2 + 0.1 s: after 2 rounds 0.6 s, 3 -> 0.9 s, 4 -> 1.2 s > the 1 s budget
    assert metrics["rounds"] == len(samples["prefill_s"]) == 4
    assert samples["prefill_s"] == pytest.approx([PREFILL_S] * 4)
    assert samples["decode_token_s"] == pytest.approx(steps * 4)
    assert metrics["ttft_s"] == pytest.approx(PREFILL_S)
    assert metrics["prefill_tokens_per_s"] == pytest.approx(4 * 16 / PREFILL_S)
    assert metrics["decode_token_p50_s"] == pytest.approx(np.median(steps))
    assert metrics["decode_token_p90_s"] == pytest.approx(np.percentile(steps * 4, 90))
    assert metrics["decode_tokens_per_s"] == pytest.approx(4 * 16 / (4 * sum(steps)))
    assert metrics["tokens_per_s"] == pytest.approx(4 * 5 / (PREFILL_S + sum(steps)))
    assert (metrics["batch"], metrics["prompt_len"], metrics["new_tokens"]) == (4, 16, 5)
    assert metrics["attention_kernel_decode"] == "fake"
    assert "decode: unstable" in metrics["warning"]               # the steps differ by up to 4x


def test_round_count_bounds() -> None:
    clock = FakeClock()
    _, samples = generation.measure(FakeGenerator(clock), budget_s=0.01, clock=clock)
    assert len(samples["prefill_s"]) == generation.ROUNDS[0]      # the minimum, even over budget
    clock = FakeClock()
    _, samples = generation.measure(FakeGenerator(clock), budget_s=1e6, clock=clock)
    assert len(samples["prefill_s"]) == generation.ROUNDS[1]


def test_generate_returns_every_token() -> None:
    clock = FakeClock()
    gen = FakeGenerator(clock, batch=2, prompt_len=3, new_tokens=4)
    gen.compile()
    np.testing.assert_array_equal(generation.generate(gen), [[3, 4, 5, 6], [6, 7, 8, 9]])


def test_one_new_token_is_refused() -> None:
    clock = FakeClock()
    with pytest.raises(ValueError, match="at least 2 new tokens"):
        generation.measure(FakeGenerator(clock, new_tokens=1), clock=clock)
