"""Each case runs in its own process: crashes, hangs, exceptions and OOM become results."""

import pytest

from xpubench.case import Case
from xpubench.launch.runner import run_cases
from xpubench.results import store


def selftest(behaviour, **opts):
    return Case(workload="selftest", backend="numpy", device="cpu", mode="train", batch_size=1,
                options={"behaviour": behaviour, **opts})


@pytest.mark.slow
@pytest.mark.parametrize("launch", ["forkserver", "spawn"])   # launch/forkserver.py; spawn: accelerator cases
def test_faults_are_recorded_and_good_cases_still_run(tmp_path, monkeypatch, launch):
    monkeypatch.setenv("XPUBENCH_LAUNCH", launch)
    out = tmp_path / "r.jsonl"
    cases = [selftest("ok"), selftest("segfault"), selftest("hang"), selftest("raise"),
             selftest("oom"), selftest("exit", code=7), selftest("sleep", seconds=0.2)]
    # 4 s, as test_sweep_faults: the hang waits out the whole timeout, the other cases (numpy workers) end in ~1 s
    results = run_cases(cases, out, fingerprint={"hostname": "t"}, timeout_s=4,
                        memory_limit_bytes=1 << 30)
    status = [(r.case["options"]["behaviour"], r.status) for r in results]
    assert status == [("ok", "ok"), ("segfault", "crash"), ("hang", "timeout"), ("raise", "error"),
                      ("oom", "oom"), ("exit", "crash"), ("sleep", "ok")]
    assert "SIGSEGV" in results[1].message
    assert "4 s" in results[2].message
    assert "deliberate exception" in results[3].message
    assert "code 7" in results[5].message
    assert {r.metrics["launch"] for r in results} == {launch}
    loaded = store.load_file(out).results
    assert [r.status for r in loaded] == [r.status for r in results]
    assert all(r.fingerprint == {"hostname": "t"} for r in loaded)


@pytest.mark.slow
@pytest.mark.parametrize("sizes,expected", [((64, 128, 256), ["oom", "skipped", "skipped"])])
def test_batches_larger_than_an_oom_are_skipped_not_shrunk(tmp_path, sizes, expected):
    cases = [Case(workload="selftest", backend="numpy", device="cpu", mode="train", batch_size=b,
                  options={"behaviour": "oom"}) for b in sizes]
    results = run_cases(cases, None, fingerprint={}, timeout_s=20, memory_limit_bytes=1 << 30)
    assert [r.status for r in results] == expected
    assert "batch size 64, which ran out of memory" in results[1].message
