"""STREAM-like bandwidth: bytes counted per kernel on a fake clock, the kernels' results, array sizing
from a sysfs cache tree the test writes. No test compares two timed figures."""

import numpy as np
import pytest

from xpubench.harness import bandwidth
from xpubench.harness.bandwidth import (
    Bandwidth,
    Kernel,
    StreamOps,
    array_bytes_for,
    llc_bytes,
    measure_bandwidth,
)


class FakeClock:
    def __init__(self):
        self.now = 50.0

    def __call__(self):
        return self.now


def on_fake_clock(ops: StreamOps, clock: FakeClock, seconds: dict[str, float]) -> StreamOps:
    """The same kernels (they really run) but each call takes ``seconds[name]`` of fake time."""
    def timed(name, kernel):
        def run():
            out = kernel.run()
            clock.now += seconds[name]
            return out
        return Kernel(run, kernel.transfers, kernel.check, kernel.description)

    return StreamOps({k: timed(k, v) for k, v in ops.kernels.items()}, ops.sync, ops.array_bytes)


def test_copy_counts_two_arrays_and_triad_three_on_a_fake_clock():
    from xpubench.backends import numpy_ceiling

    clock = FakeClock()
    ops = numpy_ceiling.stream_ops("cpu", array_bytes=4 * 2**20)
    assert ops.array_bytes == 4 * 2**20
    bw = measure_bandwidth(on_fake_clock(ops, clock, {"copy": 0.002, "triad": 0.003}), backend="numpy",
                           device="cpu", clock=clock)
    copy, triad = bw.kernels["copy"], bw.kernels["triad"]
    assert copy.bytes_per_call == 2 * ops.array_bytes and triad.bytes_per_call == 3 * ops.array_bytes
    assert copy.gb_per_s == pytest.approx(2 * 4 * 2**20 / 0.002 / 1e9)     # 4.19 GB/s
    assert triad.gb_per_s == pytest.approx(3 * 4 * 2**20 / 0.003 / 1e9)    # the same 4.19 GB/s
    assert copy.best_gb_per_s == pytest.approx(copy.gb_per_s) and len(copy.samples_s) == 7
    assert bw.gb_per_s == pytest.approx(max(copy.gb_per_s, triad.gb_per_s))
    assert copy.error is None and triad.error is None and bw.warning is None


def test_the_bandwidth_is_compared_with_the_spec_and_round_trips():
    clock = FakeClock()
    n = 1000
    a = np.ones(n, np.float32)
    ops = StreamOps({"copy": Kernel(lambda: clock.__setattr__("now", clock.now + 1e-6), 2, lambda: None, "fake")},
                    sync=lambda out: None, array_bytes=a.nbytes)
    bw = measure_bandwidth(ops, backend="fake", device="gpu:0", spec_bytes_per_s=16e9, clock=clock)
    assert bw.gb_per_s == pytest.approx(8.0) and bw.spec_gb_per_s == 16.0 and bw.pct_of_spec == pytest.approx(0.5)
    assert Bandwidth.from_dict(bw.as_dict()) == bw


def test_a_wrong_kernel_gets_no_figure():
    ops = StreamOps({"copy": Kernel(lambda: None, 2, lambda: "wrong result at element 3", "broken")},
                    sync=lambda out: None, array_bytes=1024)
    bw = measure_bandwidth(ops, backend="fake", device="cpu", clock=FakeClock())
    assert bw.gb_per_s is None and "wrong result" in bw.warning and bw.kernels["copy"].error


def test_mismatch_finds_the_first_bad_element():
    assert bandwidth.mismatch(np.arange(5.0), np.arange(5.0)) is None
    wrong = np.arange(5.0)
    wrong[3] = 9
    assert "element 3" in bandwidth.mismatch(wrong, np.arange(5.0))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["numpy", "torch", "jax"])
def test_each_backends_kernels_compute_what_they_claim(backend):
    """Real kernels on a small array: results checked, and the declared transfers per call."""

    from xpubench import backends

    ops = backends.get(backend).ceiling_ops().stream_ops("cpu", array_bytes=2 * 2**20 + 12)
    loop = getattr(backends.get(backend).ceiling_ops(), "LOOP", 1)
    assert {k: v.transfers for k, v in ops.kernels.items()} == {"copy": 2 * loop, "triad": 3 * loop}
    for kernel in ops.kernels.values():
        ops.sync(kernel.run())
        assert kernel.check() is None
    bw = measure_bandwidth(ops, backend=backend, device="cpu", budget_s=0.5)
    assert bw.gb_per_s and bw.gb_per_s > 0 and bw.warning is None


def _cache(root, cpu, index, level, kind, size, shared):
    d = root / f"cpu{cpu}" / "cache" / f"index{index}"
    d.mkdir(parents=True)
    for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
        (d / name).write_text(f"{value}\n")


def test_last_level_cache_counts_each_shared_cache_once(tmp_path):
    for cpu in range(4):       # two L3 slices (CPUs 0-1 and 2-3), a private L2 each
        _cache(tmp_path, cpu, 0, 1, "Data", "32K", cpu)
        _cache(tmp_path, cpu, 1, 1, "Instruction", "32K", cpu)
        _cache(tmp_path, cpu, 2, 2, "Unified", "512K", cpu)
        _cache(tmp_path, cpu, 3, 3, "Unified", "16384K", "0-1" if cpu < 2 else "2-3")
    assert llc_bytes([0, 1, 2, 3], sys_cpu=tmp_path) == 2 * 16 * 2**20
    assert llc_bytes([0, 1], sys_cpu=tmp_path) == 16 * 2**20
    assert llc_bytes([0], sys_cpu=tmp_path / "missing") is None


def test_array_size_is_four_times_the_cache_within_memory():
    assert array_bytes_for(32 * 2**20, None) == 128 * 2**20
    assert array_bytes_for(1 * 2**20, None) == bandwidth.MIN_ARRAY_BYTES
    assert array_bytes_for(None, None) == bandwidth.DEFAULT_ARRAY_BYTES
    assert array_bytes_for(None, None, accelerator=True) == bandwidth.DEFAULT_ACCEL_ARRAY_BYTES
    # an accelerator's cache counts as at least the largest known one (MI300X's 256 MB Infinity Cache; an
    # H100's 50 MB L2 would give 200 MB arrays): 1 GiB, within a quarter of the memory over three arrays
    assert array_bytes_for(50 * 2**20, 80 * 2**30, accelerator=True) == 4 * bandwidth.LARGEST_ACCEL_CACHE
    assert array_bytes_for(50 * 2**20, 8 * 2**30, accelerator=True) == int(0.25 * 8 * 2**30 / 3)
    assert array_bytes_for(64 * 2**20, 1 * 2**30) == int(0.25 * 2**30 / 3)               # memory caps it
