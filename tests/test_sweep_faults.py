"""A sweep through the real API in which four cases fail in four ways and every other case still ends ok.

The faults come from the selftest workload (workloads/selftest.py); the good cases include real numpy
matmuls. Each failure is recorded with the right status and message, in plan order, in the file.
"""


import pytest
from conftest import this_machine

import xpubench
from xpubench.api import plan_path
from xpubench.case import Case
from xpubench.results import store


def environment():
    """The machine detected once per test run (conftest.this_machine)."""
    return this_machine()


FAULTS = {"segfault": "crash", "oom": "oom", "hang": "timeout", "raise": "error"}


@pytest.mark.slow
def test_four_faults_and_every_other_case_ok(tmp_path):
    out = tmp_path / "sweep.jsonl"
    behaviours = ["ok", "segfault", {"behaviour": "sleep", "seconds": 0.2}, "oom", "hang", "raise", "nan"]
    results = xpubench.run(
        workloads=["selftest", "matmul"], backends=["numpy"], sizes=[64, 32], time_budget_s=0.2,
        options={"behaviours": behaviours}, output=out, timeout_s=4, memory_limit_bytes=1 << 30,
        environment=environment(), processes=2,
    )
    by_behaviour = {r.case.options.get("behaviour"): r for r in results if r.case.workload == "selftest"}
    for behaviour, status in FAULTS.items():
        assert by_behaviour[behaviour].status == status, (behaviour, by_behaviour[behaviour].message)
    assert "SIGSEGV" in by_behaviour["segfault"].message
    assert by_behaviour["oom"].message.startswith("host out of memory")
    assert "no result after 4 s" in by_behaviour["hang"].message
    assert by_behaviour["raise"].message == "RuntimeError: selftest: deliberate exception"
    others = [r for r in results if r.case.options.get("behaviour") not in FAULTS]
    assert len(others) == 5 and all(r.status == "ok" for r in others), [(r.key, r.message) for r in others]
    assert by_behaviour["nan"].metrics["value"] is None  # NaN is stored as null, the record is kept
    matmuls = [r for r in results if r.case.workload == "matmul"]
    assert [r.case.size for r in matmuls] == [32, 64]  # sorted ascending
    assert all(r.placement == "cpu" and r.metrics["warm_flops_per_s"] > 0 for r in matmuls)
    # the file holds exactly the plan, in order, each case once
    saved = store.load_file(out).results
    plan = [Case.from_dict(d) for d in __import__("json").loads(plan_path(out).read_text())["cases"]]
    assert [r.case.run_id for r in saved] == [c.run_id for c in plan] == [r.case.run_id for r in results]
    assert [r.status for r in saved] == [r.status for r in results]
    # two processes per case, round by round; a case whose first process failed starts no second one
    runs = store.load_file(out).runs
    assert [r.process for r in runs] == [0] * len(plan) + [1] * len(others)
    assert [len(r.runs) for r in saved] == [2 if r.status == "ok" else 1 for r in saved]


@pytest.mark.slow
def test_batches_given_out_of_order_are_run_ascending_and_skipped_after_oom(tmp_path):
    results = xpubench.run(
        workloads=["selftest"], backends=["numpy"], batch_sizes=[1024, 256, 512, 256],
        options={"behaviour": "oom"}, output=tmp_path / "b.jsonl", timeout_s=20,
        memory_limit_bytes=1 << 30, environment=environment(), processes=1,
    )
    assert [(r.case.batch_size, r.status) for r in results] == [
        (256, "oom"), (512, "skipped"), (1024, "skipped")]
    assert "larger than batch size 256, which ran out of memory" in results[1].message


@pytest.mark.slow
def test_placement_mismatch_is_an_error_not_a_silent_fallback(tmp_path):
    results = xpubench.run(
        workloads=["selftest"], backends=["numpy"], output=tmp_path / "p.jsonl", environment=environment(),
        processes=1, options={"behaviours": [{"behaviour": "ok", "placement": "gpu:0"}, {"behaviour": "ok"}]},
    )
    assert [r.status for r in results] == ["error", "ok"]
    assert results[0].message == "ran on gpu:0, not on the requested cpu"
    assert results[0].metrics["behaviour"] == "ok"  # the measurements are kept
