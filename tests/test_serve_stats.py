"""The serving figures from recorded samples (no timing): TTFT, TPOT, ITL and E2E as vLLM's bench serve and
AIPerf define them, throughput over the point's window, the SLO, goodput, the capacity and its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpubench.errors import UserError
from xpubench.report.charts.serving import pareto
from xpubench.serve.figures import capacity, capacity_line, meets, parse_slo, point_figures, reasons
from xpubench.serve.prompts import fraction, lengths
from xpubench.serve.sample import Sample


def _sample(start, stamps, out=None, inp=10, error=None, timed_out=False):
    s = Sample(start=start, stamps=list(stamps), input_tokens=inp, output_tokens=out or len(stamps), error=error,
               timed_out=timed_out)
    if error is None:
        s.ttft_s, s.e2e_s = stamps[0], stamps[-1] + 0.01
    return s


# two requests: first chunk at 0.2 s and 0.4 s, then a chunk every 0.05 s / 0.1 s
A = _sample(0.0, [0.2, 0.25, 0.30, 0.35])           # 4 tokens, e2e 0.36
B = _sample(0.1, [0.4, 0.5, 0.6])                   # 3 tokens, e2e 0.61 -> ends at 0.71
FAILED = _sample(0.2, [], error="HTTP 500: boom")


def test_the_figures_follow_vllm_definitions():
    m, raw = point_figures([A, B, FAILED], window_s=0.71, input_len=10)
    assert (m["requests"], m["completed"], m["failed"], m["timeouts"]) == (3, 2, 1, 0)
    assert m["ttft_p50_s"] == pytest.approx(0.3) and m["ttft_mean_s"] == pytest.approx(0.3)
    # TPOT = (E2E - TTFT) / (output tokens - 1): A (0.36-0.2)/3, B (0.61-0.4)/2
    assert raw["tpot_s"] == pytest.approx([0.16 / 3, 0.21 / 2])
    # ITL = every gap between consecutive chunks, pooled: 3 x 0.05 and 2 x 0.1
    assert sorted(raw["itl_s"]) == pytest.approx([0.05, 0.05, 0.05, 0.1, 0.1])
    assert m["itl_p50_s"] == pytest.approx(0.05) and m["itl_mean_s"] == pytest.approx(0.07)
    assert m["e2e_p50_s"] == pytest.approx((0.36 + 0.61) / 2) and m["e2e_s"] == m["e2e_p50_s"]
    assert m["output_tokens_per_s"] == pytest.approx(7 / 0.71)
    assert m["total_tokens_per_s"] == pytest.approx(27 / 0.71)
    assert m["requests_per_s"] == pytest.approx(2 / 0.71)
    assert m["user_tokens_per_s"] == pytest.approx(((3 / 0.16) + (2 / 0.21)) / 2)
    assert m["failure_reasons"] == "1 x HTTP 500: boom"
    assert m["tokens_counted"] == "usage field"


def test_percentiles_interpolate_linearly_as_numpy_does():
    samples = [_sample(i, [0.1 * (i + 1), 0.1 * (i + 1) + 0.01]) for i in range(10)]
    m, _ = point_figures(samples, window_s=5.0, input_len=1)
    assert m["ttft_p90_s"] == pytest.approx(0.91) and m["ttft_p99_s"] == pytest.approx(0.991)


def test_the_slo_counts_failures_as_missed_and_gives_goodput():
    slo = parse_slo("ttft=250ms,itl=60ms,p=50")
    assert slo.met(A) and not slo.met(B) and not slo.met(FAILED)   # B: TTFT 400 ms
    m, _ = point_figures([A, B, FAILED], window_s=0.71, input_len=10, slo=slo)
    assert m["slo_attained"] == pytest.approx(1 / 3)
    assert m["goodput_requests_per_s"] == pytest.approx(1 / 0.71)
    assert m["goodput_tokens_per_s"] == pytest.approx(4 / 0.71)
    assert not meets(m, 50)


def test_a_price_gives_dollars_per_million_output_tokens():
    m, _ = point_figures([A, B], window_s=0.71, input_len=10, usd_per_hour=3.6)
    assert m["usd_per_1m_output_tokens"] == pytest.approx(3.6 / (7 / 0.71 * 3600) * 1e6)


@pytest.mark.parametrize("text, bounds, percent", [
    ("ttft=500ms,itl=50ms,p=90", (("ttft_s", 0.5), ("tpot_s", 0.05)), 90.0),
    ("e2e=2s, tpot=40", (("e2e_s", 2.0), ("tpot_s", 0.04)), 90.0),
    ("ttft=0.5s,p=99%", (("ttft_s", 0.5),), 99.0),
])
def test_slo_text(text, bounds, percent):
    slo = parse_slo(text)
    assert slo.bounds == bounds and slo.percent == percent


@pytest.mark.parametrize("text", ["", "p=90", "ttft", "ttft=fast", "ttft=-1ms", "speed=3", "ttft=1s,p=0", "p=x,ttft=1"])
def test_bad_slo_text_is_one_line(text):
    with pytest.raises(UserError, match="--slo"):
        parse_slo(text)


def _points(shares):
    return [{"concurrency": c, "request_rate": None, "slo_attained": s, "output_tokens_per_s": 10.0 * c}
            for c, s in shares]


def test_capacity_is_the_last_point_before_the_first_miss():
    slo = parse_slo("ttft=500ms,itl=50ms,p=90")
    best = capacity(_points([(1, 1.0), (2, 0.95), (4, 0.9), (8, 0.5), (16, 0.95)]), 90)
    assert best["concurrency"] == 4      # 16 met it again, but 8 did not: the sweep's capacity stops at 4
    line = capacity_line(best, slo, 5)
    assert line.startswith("this machine serves 4 concurrent users within TTFT 500 ms and ITL 50 ms "
                           "(20 tok/s each) for 90% of requests")
    assert "(at 40.0 output tok/s in total)" in line
    assert parse_slo("ttft=2500ms,itl=0.3ms").words() == "TTFT 2.5 s and ITL 0.3 ms (3,330 tok/s each)"
    assert parse_slo("itl=300ms,e2e=120s").words() == "ITL 300 ms (3.33 tok/s each) and E2E 120 s"
    assert "at none of the 2 swept points" in capacity_line(capacity(_points([(1, 0.5), (2, 1.0)]), 90), slo, 2)


def test_reasons_are_counted_with_chunk_counts_folded():
    got = reasons([_sample(0, [], error="stream closed before [DONE] after 3 chunks"),
                   _sample(0, [], error="stream closed before [DONE] after 5 chunks"), A])
    assert got == "2 x stream closed before [DONE] after N chunks"


def test_the_pareto_front_keeps_the_points_nothing_beats_on_both_axes():
    pts = [(50.0, 50.0), (30.0, 90.0), (20.0, 80.0), (10.0, 120.0), (40.0, 40.0)]
    assert pareto(pts) == [(10.0, 120.0), (30.0, 90.0), (50.0, 50.0)]


def test_length_pairs_scale_down():
    assert lengths("1k/8k") == (1024, 8192)
    assert lengths("1k/1k", fraction("1/16")) == (64, 64)
    assert lengths("8k/1k", 0.001) == (8, 1)
    for bad in ("1k", "x/1k", "0/5"):
        with pytest.raises(UserError):
            lengths(bad)
    with pytest.raises(UserError):
        fraction("0")


RECORDED = Path(__file__).resolve().parents[1] / "results" / "cpu" / "serve_smollm-135m_q8_0.jsonl"


def test_a_recorded_sweep_holds_figures_its_raw_requests_reproduce():
    """docs/serving.md's run on the development VM: every figure follows from the requests it kept."""
    import numpy as np

    from xpubench.results import store
    from xpubench.serve.figures import capacity

    runs = store.load_file(RECORDED).runs
    assert [r.case["users"] for r in runs] == [1, 2, 4, 8]   # written as batch sizes, read as users
    for run in runs:
        m, reqs = run.metrics, run.artifacts["requests"]
        done = [q for q in reqs if q["error"] is None]
        tpot = [(q["e2e_s"] - q["ttft_s"]) / (q["output_tokens"] - 1) for q in done]
        assert run.samples["tpot_s"] == pytest.approx(tpot)
        assert m["ttft_p90_s"] == pytest.approx(np.percentile([q["ttft_s"] for q in done], 90))
        assert m["e2e_p99_s"] == pytest.approx(np.percentile([q["e2e_s"] for q in done], 99))
        assert m["itl_p50_s"] == pytest.approx(np.median(run.samples["itl_s"]))
        assert len(run.samples["itl_s"]) == sum(q["chunks"] - 1 for q in done)
        window = max(q["start_s"] + q["e2e_s"] for q in done) - min(q["start_s"] for q in reqs)
        assert m["point_s"] == pytest.approx(window)
        assert m["output_tokens_per_s"] == pytest.approx(sum(q["output_tokens"] for q in done) / window)
        slo = parse_slo(m["slo"])
        met = [q for q in done if q["ttft_s"] <= 3.0 and (q["e2e_s"] - q["ttft_s"]) / (q["output_tokens"] - 1) <= 0.5]
        assert m["slo_attained"] == pytest.approx(len(met) / len(reqs)) and slo.percent == 90
    assert capacity([r.metrics for r in runs], 90)["concurrency"] == 4


def _recorded_samples(run) -> list[Sample]:
    """A recorded point's requests as the samples they were (TTFT, E2E, tokens; the chunk times unknown)."""
    return [Sample(start=q["start_s"], ttft_s=q["ttft_s"], e2e_s=q["e2e_s"], input_tokens=q["input_tokens"],
                   output_tokens=q["output_tokens"], stamps=[q["ttft_s"]], error=q["error"])
            for q in run.artifacts["requests"]]


def test_at_one_user_per_user_tok_s_is_the_total_and_streaming_speed_leaves_the_wait_out():
    """Issue 52: at 1 user the screen showed per-user 16.9 tok/s beside a total of 3.7. AIPerf's "output token
    throughput per user" is 1 / TPOT, the wait for the first token left out (its docs: "not directly comparable"
    to the total); the per-user figure shown beside the total now counts that wait: at 1 user it is the total."""
    from xpubench.results import store

    runs = {r.case["users"]: r for r in store.load_file(RECORDED).runs}
    for users, run in runs.items():
        samples = _recorded_samples(run)
        m, _ = point_figures(samples, run.metrics["point_s"], 64)
        total, per_user, streaming = m["output_tokens_per_s"], m["user_e2e_tokens_per_s"], m["user_tokens_per_s"]
        in_flight = sum(s.e2e_s for s in samples) / run.metrics["point_s"]     # Little's law: the mean users served
        assert per_user * in_flight == pytest.approx(total)
        assert in_flight == pytest.approx(users, rel=0.01)
        assert per_user <= streaming
    one = point_figures(_recorded_samples(runs[1]), runs[1].metrics["point_s"], 64)[0]
    assert one["output_tokens_per_s"] <= one["user_e2e_tokens_per_s"] <= 1.001 * one["output_tokens_per_s"]
    assert one["user_tokens_per_s"] > 2 * one["output_tokens_per_s"]      # 22.5 against 11.0 tok/s


def test_at_one_user_on_a_fake_clock_the_total_is_the_per_user_figure():
    # back-to-back requests, 4 tokens each: TTFT 1 s (a long prefill), then a token every 0.1 s, E2E 1.3 s
    samples = [_sample(1.3 * i, [1.0, 1.1, 1.2, 1.29]) for i in range(5)]
    m, _ = point_figures(samples, window_s=1.3 * 5, input_len=10)
    assert m["output_tokens_per_s"] == pytest.approx(20 / 6.5) == pytest.approx(m["user_e2e_tokens_per_s"])
    assert m["user_tokens_per_s"] == pytest.approx(10)                # AIPerf's: 1 / TPOT, 3.25x the total
