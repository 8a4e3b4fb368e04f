"""Efficiency figures and labels (the honesty rule), arithmetic intensity from analytic, torch and XLA
byte counts."""

import pytest

from xpubench.analysis.efficiency import efficiency, matmul_bytes, roofline_bound
from xpubench.harness.ceiling import Ceiling

BASIS = "estimate: 2 cores x 2.00 GHz x 16 FLOP/cycle (AVX2 on Zen 1/Zen+); clock: /proc/cpuinfo 'cpu MHz'"


def ceiling(rate, half_width=0.02):
    return Ceiling("torch", "cpu", "fp32", rate, (2048, 2048, 2048), rate, 0.01, rate * (1 - half_width),
                   rate * (1 + half_width))


def test_a_result_below_a_known_peak_and_ceiling():
    e = efficiency(50e9, peak_flops_per_s=100e9, ceiling=ceiling(80e9), ceiling_source="measured this run")
    assert e.pct_of_peak == pytest.approx(0.5) and e.pct_of_ceiling == pytest.approx(0.625)
    assert (e.peak_label, e.peak_note, e.ceiling_label, e.ceiling_note) == ("50%", None, "62%", None)
    assert e.rank_value == pytest.approx(0.625) and not e.above_ceiling_beyond_noise


def test_unknown_peak_and_ceiling_are_na():
    e = efficiency(50e9, peak_flops_per_s=None)
    assert e.pct_of_peak is None and e.pct_of_ceiling is None and e.rank_value is None
    assert e.peak_label == "n/a" and e.ceiling_label == "n/a"
    assert efficiency(None, peak_flops_per_s=1e12).peak_label == "n/a"


def test_an_estimate_below_100_percent_is_labelled_as_an_estimate():
    e = efficiency(40e9, peak_flops_per_s=64e9, peak_is_estimate=True, peak_basis=BASIS)
    assert e.peak_label == "62% (est.)" and BASIS in e.peak_note


def test_above_the_cpu_estimate_no_percentage_over_100_is_printed_and_the_ceiling_ranks():
    """The Zen 1 case from issue 14: 68 GFLOP/s against a 64 GFLOP/s estimate."""
    e = efficiency(68e9, peak_flops_per_s=64e9, peak_is_estimate=True, peak_basis=BASIS, ceiling=ceiling(70e9))
    assert e.pct_of_peak == pytest.approx(68 / 64)
    assert e.peak_label == "above est. peak" and "%" not in e.peak_label
    assert "estimate" in e.peak_note and "clock" in e.peak_note and BASIS in e.peak_note
    assert "97% of 70.0 GFLOP/s" in e.peak_note
    assert e.rank_value == pytest.approx(68 / 70)
    without = efficiency(68e9, peak_flops_per_s=64e9, peak_is_estimate=True)
    assert "no measured ceiling" in without.peak_note and without.rank_value is None


def test_above_a_vendor_peak_says_something_is_wrong():
    e = efficiency(1.1e15, peak_flops_per_s=989.5e12, ceiling=ceiling(800e12))
    assert e.peak_label == "above spec peak" and "wrong" in e.peak_note


def test_above_the_ceiling_within_and_beyond_the_noise():
    within = efficiency(102e9, peak_flops_per_s=None, ceiling=ceiling(100e9, 0.03), achieved_rel_noise=0.02)
    assert within.noise == pytest.approx((0.03**2 + 0.02**2) ** 0.5)
    assert not within.above_ceiling_beyond_noise
    assert within.ceiling_label == "102% (within noise)" and "within" in within.ceiling_note
    beyond = efficiency(110e9, peak_flops_per_s=None, ceiling=ceiling(100e9, 0.03), ceiling_source="cache")
    assert beyond.above_ceiling_beyond_noise and beyond.ceiling_label == "110% (above ceiling)"
    assert "under-measured" in beyond.ceiling_note and "(cache)" in beyond.ceiling_note
    no_spread = efficiency(100.5e9, peak_flops_per_s=None, ceiling=ceiling(100e9, 0.0))
    assert no_spread.above_ceiling_beyond_noise      # unknown noise hides nothing


def test_arithmetic_intensity_and_the_roofline():
    m = k = n = 1024
    moved = matmul_bytes(m, k, n, 4)
    assert moved == 3 * 1024 * 1024 * 4
    e = efficiency(50e9, peak_flops_per_s=None, flops_per_call=2.0 * m * k * n, bytes_per_call=moved)
    assert e.arithmetic_intensity == pytest.approx(2 * 1024 / 12)
    assert roofline_bound(1.0, 100e9, 20e9) == 20e9           # memory bound
    assert roofline_bound(100.0, 100e9, 20e9) == 100e9        # compute bound
    assert roofline_bound(None, 100e9, 20e9) is None


def test_torch_counts_bytes_op_by_op_without_views():
    import torch

    from xpubench.backends.torch_.cost import bytes_accessed

    a, b = torch.ones(64, 32), torch.ones(32, 16)
    total, per_op = bytes_accessed(torch.matmul, a, b)
    assert total == matmul_bytes(64, 32, 16, 4) and set(per_op) == {"aten.mm"}
    total, per_op = bytes_accessed(lambda x: x.t().relu(), a)        # t() is a view: free
    assert total == 2 * 64 * 32 * 4 and set(per_op) == {"aten.relu"}


def test_xla_cost_analysis_gives_flops_and_bytes():
    import jax.numpy as jnp

    from xpubench.backends.jax_.cost import cost_analysis

    costs = cost_analysis(lambda x, y: x @ y, jnp.ones((64, 32)), jnp.ones((32, 16)))
    assert costs["flops"] == pytest.approx(2 * 64 * 32 * 16)
    assert costs["bytes_accessed"] == pytest.approx(matmul_bytes(64, 32, 16, 4))
