"""The compute-ceiling search on a fake clock (fake products whose duration is set by a rate table),
plus one short real run of the numpy adapter: no test compares two timed figures."""

import numpy as np
import pytest

from xpubench.harness import ceiling
from xpubench.harness.ceiling import (
    CONFIRM_TOP,
    CONFIRM_WINDOWS,
    Ceiling,
    GemmOps,
    candidate_shapes,
    flops,
    raise_to_observed,
    search_ceiling,
)
from xpubench.harness.matmul import MatmulOps


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def fake_ops(clock, rate_of, fail=()):
    """Products that take flops / rate_of(shape) seconds of fake time; inputs are just the shape."""

    def make_inputs(m, k, n):
        if (m, k, n) in fail:
            raise MemoryError(f"out of memory for {m}x{k}x{n}")
        return (m, k), (k, n)

    def product(a, b):
        shape = (a[0], a[1], b[1])
        clock.now += flops(shape) / rate_of(shape)
        return shape

    mm = MatmulOps(make_inputs=lambda n: make_inputs(n, n, n), product=product, sync=lambda out: None,
                   to_numpy=lambda x: np.zeros((1, 1)), placement=lambda out: "cpu", tolerance=1e-4)
    return GemmOps(mm, make_inputs)


SHAPES = [(512, 512, 512), (1024, 1024, 1024), (1024, 4096, 1024), (2048, 512, 2048), (2048, 2048, 2048)]


def test_search_finds_the_fastest_shape_and_keeps_raw_samples():
    clock = FakeClock()
    rates = {(1024, 4096, 1024): 150e9}
    ops = fake_ops(clock, lambda s: rates.get(s, 100e9))
    c = search_ceiling(ops, SHAPES, backend="fake", device="cpu", precision="fp32", budget_s=1000, clock=clock,
                       check=False)
    assert c.shape == (1024, 4096, 1024)
    assert c.flops_per_s == pytest.approx(150e9)
    assert c.best_window_flops_per_s == pytest.approx(150e9)
    assert c.cv == pytest.approx(0.0, abs=1e-9)
    assert len(c.samples_s) == CONFIRM_WINDOWS
    assert all(s == pytest.approx(flops(c.shape) / 150e9) for s in c.samples_s)
    tried = {tuple(s["shape"]): s for s in c.shapes}
    assert set(tried) == set(SHAPES)
    assert sum(s["phase"] == "confirm" for s in tried.values()) == CONFIRM_TOP
    assert tried[(1024, 4096, 1024)]["phase"] == "confirm"
    assert c.elapsed_s <= 1000 and not c.skipped


def test_search_stays_within_its_budget_and_records_what_it_skipped():
    clock = FakeClock()
    ops = fake_ops(clock, lambda s: 10e9)          # 2048^3 takes 1.7 s per product here
    shapes = candidate_shapes([1024, 2048, 4096])
    c = search_ceiling(ops, shapes, backend="fake", device="cpu", precision="fp32", budget_s=20, clock=clock,
                       check=False)
    assert c.elapsed_s <= 20 * 1.1          # a window in flight may overrun by a fraction of its length
    assert c.skipped and all("budget" in s for s in c.skipped)
    measured = [tuple(s["shape"]) for s in c.shapes if s["samples_s"]]
    assert measured[:2] == [(1024, 1024, 1024), (2048, 2048, 2048)]   # default sizes come first
    assert c.flops_per_s == pytest.approx(10e9)


def test_a_failing_shape_is_recorded_and_the_search_goes_on():
    clock = FakeClock()
    ops = fake_ops(clock, lambda s: 50e9, fail={(1024, 4096, 1024)})
    c = search_ceiling(ops, SHAPES, backend="fake", device="cpu", precision="fp32", budget_s=100, clock=clock,
                       check=False)
    failed = [s for s in c.shapes if s["error"]]
    assert len(failed) == 1 and "MemoryError" in failed[0]["error"]
    assert c.flops_per_s == pytest.approx(50e9) and c.shape != (1024, 4096, 1024)


def test_a_wrong_kernel_cannot_win():
    """Real numpy products (fake time): the shape whose product is wrong is the 'fastest' but is refused."""
    clock = FakeClock()
    bad = (64, 128, 64)

    def product(a, b):
        shape = (a.shape[0], a.shape[1], b.shape[1])
        clock.now += flops(shape) / (1e12 if shape == bad else 1e9)
        out = a @ b
        return out * 1.01 if shape == bad else out

    mm = MatmulOps(make_inputs=None, product=product, sync=lambda out: None,
                   to_numpy=lambda x: np.asarray(x, dtype=np.float64), placement=lambda out: "cpu", tolerance=1e-4)
    ops = GemmOps(mm, ceiling.shaped_inputs_numpy)
    c = search_ceiling(ops, [(32, 32, 32), bad, (64, 64, 64)], backend="fake", device="cpu", precision="fp32",
                       budget_s=100, clock=clock)
    wrong = next(s for s in c.shapes if tuple(s["shape"]) == bad)
    assert "wrong result" in wrong["error"] and not wrong["samples_s"]
    assert c.shape != bad and c.flops_per_s == pytest.approx(1e9)


def test_no_measurable_shape_gives_no_ceiling_and_says_why():
    clock = FakeClock()
    ops = fake_ops(clock, lambda s: 1e9, fail=set(SHAPES))
    c = search_ceiling(ops, SHAPES, backend="fake", device="cpu", precision="fp32", budget_s=10, clock=clock,
                       check=False)
    assert c.flops_per_s is None and c.shape is None and "no shape measured" in c.warning


def test_candidate_shapes_put_the_defaults_first_and_respect_memory():
    shapes = candidate_shapes([2048, 1024])
    assert shapes[:2] == [(1024, 1024, 1024), (2048, 2048, 2048)]
    rest = shapes[2:]
    assert [flops(s) for s in rest] == sorted(flops(s) for s in rest)
    assert any(m != n or m != k for m, k, n in rest)              # non-square shapes are tried
    memory = 3 * 2048**2 * 4 / 0.15                          # 15% = three fp32 2048 x 2048 matrices
    small = candidate_shapes([1024, 4096], memory_bytes=memory)
    assert (4096, 4096, 4096) not in small and (1024, 1024, 1024) in small and (2560, 2560, 2560) not in small
    assert all(ceiling.input_bytes(s, 4) <= 0.15 * memory for s in small)
    accel = candidate_shapes([8192], accelerator=True)
    assert all(d % 128 == 0 for s in accel for d in s)


def test_ceiling_round_trips_through_json_form():
    clock = FakeClock()
    c = search_ceiling(fake_ops(clock, lambda s: 80e9), SHAPES[:2], backend="torch", device="cpu", precision="bf16",
                       budget_s=50, clock=clock, check=False)
    back = Ceiling.from_dict(c.as_dict())
    assert back == c and back.shape == c.shape and isinstance(back.shape, tuple)


def test_ceiling_noise_and_raise_to_observed():
    clock = FakeClock()
    c = search_ceiling(fake_ops(clock, lambda s: 80e9), SHAPES[:2], backend="numpy", device="cpu", precision="fp32",
                       budget_s=50, clock=clock, check=False)
    assert c.rel_noise == pytest.approx(0.0, abs=1e-9)
    assert raise_to_observed(c, 70e9, "matmul n2048") is c                 # slower: the ceiling stands
    raised = raise_to_observed(c, 90e9, "matmul n2048")
    assert raised.flops_per_s == 90e9 and "matmul n2048" in raised.warning
    assert raised.shapes == c.shapes and raised.rel_noise is None


@pytest.mark.slow
def test_numpy_search_runs_on_this_cpu():
    """The real adapter, a small budget: a figure, from shapes that were checked against float64."""
    from xpubench.backends import numpy_ceiling

    ops = numpy_ceiling.gemm_ops("cpu", "fp32")
    c = search_ceiling(ops, [(128, 128, 128), (256, 64, 128), (256, 256, 256)], backend="numpy", device="cpu",
                       precision="fp32", budget_s=1.5)
    assert c.flops_per_s and c.flops_per_s > 0 and c.shape in {(128, 128, 128), (256, 64, 128), (256, 256, 256)}
    assert all(s["error"] is None for s in c.shapes)


def test_a_shape_that_fails_when_confirmed_keeps_its_scout_figure():
    clock = FakeClock()
    ops = fake_ops(clock, lambda s: 80e9 if s == (2048, 2048, 2048) else 60e9)
    product, calls = ops.matmul.product, {"n": 0}

    def flaky(a, b):
        shape = (a[0], a[1], b[1])
        if shape == (2048, 2048, 2048):
            calls["n"] += 1
            if calls["n"] > 6:        # cold call and scout windows pass, the confirm pass fails
                raise RuntimeError("device lost")
        return product(a, b)

    ops.matmul.product = flaky
    c = search_ceiling(ops, SHAPES, backend="fake", device="gpu:0", precision="bf16", budget_s=100, clock=clock,
                       check=False)
    kept = next(s for s in c.shapes if tuple(s["shape"]) == (2048, 2048, 2048))
    assert kept["phase"] == "scout" and kept["samples_s"] and c.shape == (2048, 2048, 2048)
    assert any("confirm failed (RuntimeError" in s for s in c.skipped)
