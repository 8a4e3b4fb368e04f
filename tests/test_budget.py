"""The whole run's time budget (launch/budget.py) and its hooks in the runner and api.run, with a fake
clock and fake worker durations: no process starts and no real time is read."""

from __future__ import annotations

import pytest

from xpubench.case import Case
from xpubench.launch import runner
from xpubench.launch.budget import Budget, first_cases_first
from xpubench.plan.request import BRIEF_BUDGET_S, PlanRequest, budget_s
from xpubench.results.fold import aggregate_all


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _case(workload="mnist_cnn", backend="torch", size=None, batch=32) -> Case:
    if workload == "matmul":
        return Case(workload="matmul", backend=backend, device="cpu", mode="matmul", size=size or 1024)
    return Case(workload=workload, backend=backend, device="cpu", mode="train", batch_size=batch, steps=2)


def _fake_runner(monkeypatch, clock: FakeClock, durations: dict[str, float], hang_key: str | None = None):
    """runner.run_one replaced: each case 'takes' its duration on the fake clock; ``hang_key`` never
    ends, so it lasts exactly the timeout it is given. Returns the timeouts given, by case key."""
    timeouts: dict[str, list[float]] = {}

    def fake_run_one(case, *, timeout_s, memory_limit_bytes=None, workdir=None, process=0, environment=None):
        timeouts.setdefault(case.key, []).append(timeout_s)
        if case.key == hang_key:
            clock.now += timeout_s
            return {"status": "timeout", "message": f"no result after {timeout_s:g} s: killed"}, timeout_s
        clock.now += durations[case.key]
        headline = {"matmul": "warm_s", "train": "step_s", "infer": "latency_s"}[case.mode]   # an ok result's time
        return {"status": "ok", "metrics": {headline: 0.01}}, durations[case.key]

    monkeypatch.setattr(runner, "run_one", fake_run_one)
    return timeouts


def test_the_default_run_gets_150_s_and_a_named_workload_none():
    assert budget_s(PlanRequest()) == BRIEF_BUDGET_S == 150.0
    for named in ({"workloads": ["matmul"]}, {"model": "m.py:f"}, {"all_cases": True}, {"options": {"preset": "gpt2"}},
                  {"quick": False}):   # naming what to run, or the full default sweep: no budget unless asked
        assert budget_s(PlanRequest(**named)) is None
        assert budget_s(PlanRequest(budget_s=40, **named)) == 40.0
    assert budget_s(PlanRequest(budget_s=40)) == 40.0


def test_each_workload_first_case_comes_first_and_order_inside_a_group_is_kept():
    cases = [_case("matmul", "numpy", 1024), _case("matmul", "numpy", 2048), _case("matmul", "torch", 1024),
             _case("mnist_cnn", "torch", batch=32), _case("mnist_cnn", "torch", batch=64),
             _case("weather_gru", "torch"), _case("mnist_cnn", "jax"), _case("weather_gru", "jax")]
    ordered = [c.key for c in first_cases_first(cases)]
    firsts = ordered[:3]
    assert [k.split("/")[0] for k in firsts] == ["matmul", "mnist_cnn", "weather_gru"]
    pair_firsts = ordered[3:6]   # then the first case of each workload x backend not yet seen
    assert {k.split("/")[1] for k in pair_firsts} == {"torch", "jax"}
    assert ordered.index("mnist_cnn/torch/cpu/train/fp32/b32") < ordered.index("mnist_cnn/torch/cpu/train/fp32/b64")
    assert ordered.index("matmul/numpy/cpu/matmul/fp32/n1024") < ordered.index("matmul/numpy/cpu/matmul/fp32/n2048")
    assert sorted(ordered) == sorted(c.key for c in cases)


def test_a_case_that_cannot_fit_is_skipped_with_the_reason():
    clock = FakeClock()
    estimates = {"mnist_cnn": 30.0, "weather_gru": 80.0}
    b = Budget(100.0, estimate=lambda c: estimates[c.workload], clock=clock)
    mnist, weather = _case("mnist_cnn"), _case("weather_gru")
    assert b.admit(mnist, 0) is None
    clock.now += 30.0
    b.record(mnist, 30.0)
    reason = b.admit(weather, 0)
    assert reason and "150" not in reason and "100 s budget has 70 s left" in reason and "80 s" in reason
    assert "--budget" in reason
    assert b.skipped == [weather.key]
    assert b.admit(mnist, 1) is None             # 30 s still fits in 70 s
    clock.now += 50.0
    assert b.admit(mnist, 2) == "process 3 does not fit"   # 30 s > 20 s left: cut, not skipped
    assert b.cut == {mnist.key: 1} and b.skipped == [weather.key]


def test_replanning_scales_the_remaining_estimates_by_what_finished_cases_measured():
    clock = FakeClock()
    b = Budget(100.0, estimate=lambda c: 10.0, clock=clock)
    a, c = _case("mnist_cnn"), _case("weather_gru")
    assert b.scale == 1.0 and b.expected(c) == 10.0
    clock.now += 30.0
    b.record(a, 30.0)                             # took 3x its estimate
    assert b.scale == pytest.approx(3.0)
    assert b.expected(c) == pytest.approx(30.0)
    b.record(a, 10.0)                             # 40 s measured for 20 s estimated
    assert b.scale == pytest.approx(2.0)
    clock.now = 1000.0 + 85.0                     # 15 s left: 20 s expected no longer fits, 10 s would
    assert "about 20 s" in b.admit(c, 0) and "x 2.00" in b.admit(c, 0)
    b.record(a, 0.0)                              # a process that never ran (skipped) says nothing
    assert b.scale == pytest.approx(2.0)


def test_the_worker_timeout_is_capped_by_the_time_left_plus_a_margin():
    clock = FakeClock()
    b = Budget(100.0, estimate=lambda c: 1.0, clock=clock, margin_s=10.0)
    assert b.timeout(600.0) == 110.0
    assert b.timeout(50.0) == 50.0
    clock.now += 95.0
    assert b.timeout(600.0) == 15.0
    clock.now += 500.0                            # over budget: only the margin
    assert b.timeout(600.0) == 10.0


def test_runner_every_workload_gets_a_case_and_what_cannot_fit_is_recorded_skipped(monkeypatch, tmp_path):
    clock = FakeClock()
    cases = [_case("matmul", "numpy", 1024), _case("matmul", "numpy", 2048), _case("matmul", "numpy", 4096),
             _case("mnist_cnn", batch=32), _case("mnist_cnn", batch=64), _case("weather_gru")]
    durations = {c.key: 10.0 for c in cases}
    _fake_runner(monkeypatch, clock, durations)
    b = Budget(45.0, estimate=lambda c: 10.0, clock=clock)
    cut = []
    out = tmp_path / "r.jsonl"
    runs = runner.run_cases(cases, out, fingerprint={}, processes=2, budget=b,
                            on_cut=lambda case, p: cut.append((case.key, p)))
    ran = [(r.key, r.process, r.status) for r in runs]
    # round 0, first cases first: matmul n1024, mnist b32, weather, then matmul n2048 (40 s spent)
    ok_first = [k for k, p, s in ran if s == "ok" and p == 0]
    assert {k.split("/")[0] for k in ok_first} == {"matmul", "mnist_cnn", "weather_gru"}
    assert ok_first[:3] == [cases[0].key, cases[3].key, cases[5].key]
    skipped = {k: s for k, p, s in ran if s == "skipped"}
    assert set(skipped) == {cases[2].key, cases[4].key}
    assert all("budget" in r.message for r in runs if r.status == "skipped")
    assert not any(p == 1 for k, p, s in ran)     # no second process fits: cut, not recorded
    assert len(cut) == 4
    results = aggregate_all(runner_runs_from(out))
    assert {r.key: r.status for r in results}[cases[2].key] == "skipped"   # in the file, for the reports
    assert len(results) == len(cases)


def runner_runs_from(path):
    from xpubench.results import store

    return store.load_file(path).runs


def test_runner_caps_a_hung_workers_timeout_so_the_run_ends_near_its_budget(monkeypatch):
    clock = FakeClock()
    hung, after = _case("mnist_cnn"), _case("weather_gru")
    timeouts = _fake_runner(monkeypatch, clock, {after.key: 5.0}, hang_key=hung.key)
    b = Budget(60.0, estimate=lambda c: 5.0, clock=clock, margin_s=10.0)
    runs = runner.run_cases([hung, after], None, fingerprint={}, processes=1, timeout_s=600.0, budget=b)
    assert timeouts[hung.key] == [70.0]           # 60 s left + 10 s margin, not 600 s
    assert runs[0].status == "timeout" and "60 s budget was spent" in runs[0].message
    assert runs[1].status == "skipped"            # nothing left for the next case
    assert clock.now - 1000.0 <= 60.0 + 10.0


def test_runner_without_a_budget_keeps_the_plan_order_and_the_timeout(monkeypatch):
    clock = FakeClock()
    cases = [_case("matmul", "numpy", 1024), _case("matmul", "numpy", 2048), _case("mnist_cnn")]
    timeouts = _fake_runner(monkeypatch, clock, {c.key: 100.0 for c in cases})
    runs = runner.run_cases(cases, None, fingerprint={}, processes=1, timeout_s=600.0)
    assert [r.key for r in runs] == [c.key for c in cases]
    assert all(t == [600.0] for t in timeouts.values())


def test_api_run_gives_the_default_run_a_budget_and_writes_it_to_the_plan(monkeypatch, tmp_path):
    import json

    from xpubench import api

    seen = {}

    def fake_run_cases(cases, out, **kwargs):
        seen.update(kwargs, cases=cases)
        return []

    monkeypatch.setattr(runner, "run_cases", fake_run_cases)
    env = {"host": {}, "backends": {"numpy": {"installed": True, "devices": [{"id": "cpu", "kind": "cpu"}]}}}
    got = []
    hooks = api.RunHooks(on_budget=got.append, on_warning=lambda w: None)
    api.run(output=tmp_path / "a.jsonl", environment=env, hooks=hooks)
    assert seen["budget"].total_s == 150.0 and got == [seen["budget"]]
    assert json.loads((tmp_path / "a.jsonl.plan.json").read_text())["settings"]["budget_s"] == 150.0
    api.run(output=tmp_path / "b.jsonl", environment=env, hooks=hooks, workloads=["matmul"])
    assert seen["budget"] is None
    api.run(output=tmp_path / "c.jsonl", environment=env, hooks=hooks, workloads=["matmul"], budget_s=30)
    assert seen["budget"].total_s == 30.0


@pytest.mark.parametrize("bad", [0, -5, "fast", True, float("inf")])
def test_a_bad_budget_is_one_line(bad, tmp_path):
    from xpubench import api
    from xpubench.errors import UserError

    with pytest.raises(UserError, match="--budget"):
        api.run(output=tmp_path / "a.jsonl", environment={}, workloads=["matmul"], budget_s=bad)


def test_the_progress_bar_shows_the_time_left():
    from rich.console import Console

    from xpubench.report.render.terminal import RunProgress

    clock = FakeClock()
    progress = RunProgress(Console(file=None, force_terminal=False), enabled=False)
    assert progress.left_column.render(None).plain == ""
    progress.budget(Budget(150.0, estimate=lambda c: 1.0, clock=clock))
    clock.now += 38.0
    assert progress.left_column.render(None).plain == "112 s of 150 s left"


def test_the_dry_run_preview_says_what_the_budget_leaves_out():
    from xpubench.launch.budget import preview
    from xpubench.plan import estimate

    cases = [_case("matmul", "numpy", 1024), _case("mnist_cnn"), _case("weather_gru"), _case("mnist_cnn", "jax")]
    seconds = {"matmul": 2.0, "mnist_cnn": 10.0, "weather_gru": 30.0}
    ran, skipped = preview(cases, 2, 25.0, lambda c: seconds[c.workload])
    # round 0: matmul 2, mnist 10 (12), weather 30 does not fit, mnist/jax 10 (22); round 1: matmul 2 (24)
    assert skipped == [cases[2].key]
    assert ran == {cases[0].key: 2, cases[1].key: 1, cases[3].key: 1}
    env = {"host": {}, "backends": {}}
    modelled = lambda case: estimate.case_seconds(case, env)[0]
    assert estimate.budget_note(cases, modelled, None, 3) is None
    assert "fits every case" in estimate.budget_note(cases[:1], modelled, 1000.0, 1)
    note = estimate.budget_note(cases, modelled, 1.0, 1)
    assert "4 case(s) skipped" in note and "re-plans" in note


def test_a_capped_timeout_is_said_in_tenths_of_a_second():
    clock = FakeClock()
    b = Budget(100.0, estimate=lambda c: 1.0, clock=clock, margin_s=10.0)
    clock.now += 38.38461
    assert b.timeout(600.0) == 71.6


def test_with_estimates_the_first_cases_run_cheapest_first_so_more_workloads_fit(monkeypatch):
    clock = FakeClock()
    cost = {"cifar10_resnet": 20.0, "imdb_lstm": 8.0, "mnist_cnn": 8.0, "weather_gru": 12.0}
    cases = [_case(w) for w in cost] + [_case("cifar10_resnet", "jax"), _case("imdb_lstm", batch=64)]
    ordered = first_cases_first(cases, lambda c: cost[c.workload])
    assert [c.workload for c in ordered[:4]] == ["imdb_lstm", "mnist_cnn", "weather_gru", "cifar10_resnet"]
    assert ordered[4:] == [cases[4], cases[5]]        # tier 1 (cifar/jax), then the rest in plan order
    _fake_runner(monkeypatch, clock, {c.key: cost[c.workload] for c in cases})
    b = Budget(30.0, estimate=lambda c: cost[c.workload], clock=clock)
    runs = runner.run_cases(cases[:4], None, fingerprint={}, processes=1, budget=b)
    assert {r.case["workload"]: r.status for r in runs} == {
        "imdb_lstm": "ok", "mnist_cnn": "ok", "weather_gru": "ok", "cifar10_resnet": "skipped"}


def test_the_run_keeps_a_reserve_for_its_closing_output_and_repeats_need_room():
    """api.run's budget keeps RESERVE_S for the output after the last worker, and starts a case's further
    (optional) process only with REPEAT_SAFETY x its estimate of room: a run measured 150.8 s against its
    150 s budget before (the last admitted repeat ran to the end, then the answer printed)."""
    from xpubench.launch.budget import REPEAT_SAFETY, RESERVE_S, Budget

    now = [0.0]
    case = type("C", (), {"key": "k", "workload": "w", "backend": "b"})()
    b = Budget(100.0, estimate=lambda c: 10.0, clock=lambda: now[0], reserve_s=RESERVE_S,
               repeat_safety=REPEAT_SAFETY)
    now[0] = 100.0 - RESERVE_S - 10.0          # exactly the estimate left after the reserve
    assert b.admit(case, 0) is None              # a first process fits
    assert b.admit(case, 1) == "process 2 does not fit"   # a repeat needs 12.5 s
    now[0] += 1.0
    assert "budget has" in b.admit(case, 0)      # less than the estimate left once the reserve is kept


def _honest_fake_runner(monkeypatch, clock: FakeClock, durations: dict[str, float]):
    """runner.run_one replaced by a worker that needs ``durations[key]`` seconds of the fake clock and is
    killed at its timeout when that comes first (as run_one kills a worker's process group)."""
    def fake_run_one(case, *, timeout_s, memory_limit_bytes=None, workdir=None, process=0, environment=None):
        need = durations[case.key]
        if need > timeout_s:
            clock.now += timeout_s
            return {"status": "timeout", "message": f"no result after {timeout_s:g} s: killed"}, timeout_s
        clock.now += need
        return {"status": "ok", "metrics": {}}, need

    monkeypatch.setattr(runner, "run_one", fake_run_one)


@pytest.mark.parametrize("wrong_by", [0.2, 1.0, 3.0, 8.0])
def test_the_line_holds_whatever_the_estimates_say(monkeypatch, wrong_by):
    """Issue 21: a default run took 154 s of its 150 s under load. Every worker here takes ``wrong_by`` x
    its estimate (with a spread); the runner's cases must still end by the budget less the reserve, so the
    closing output fits in the reserve."""
    import random

    from xpubench.launch.budget import REPEAT_SAFETY, RESERVE_S

    rng = random.Random(21)
    clock = FakeClock()
    workloads = ("mnist_cnn", "fashion_cnn", "cifar10_resnet", "imdb_lstm", "shakespeare_lstm", "weather_gru", "gpt")
    cases = [_case(w, b) for w in workloads for b in ("torch", "jax")]
    estimates = {c.key: rng.uniform(4.0, 35.0) for c in cases}
    _honest_fake_runner(monkeypatch, clock, {k: e * wrong_by * rng.uniform(0.7, 1.5) for k, e in estimates.items()})
    b = Budget(150.0, estimate=lambda c: estimates[c.key], clock=clock, reserve_s=RESERVE_S,
               repeat_safety=REPEAT_SAFETY)
    clock.now += 4.0                                  # detection and planning, inside the budget
    runs = runner.run_cases(cases, None, fingerprint={}, processes=3, timeout_s=600.0, budget=b)
    assert clock.now - b.started <= 150.0 - RESERVE_S + 1e-9
    assert any(r.status == "ok" for r in runs)
    killed = [r for r in runs if r.status == "timeout"]
    assert all("150 s budget was spent" in r.message for r in killed)


def test_a_cases_further_processes_are_judged_by_what_its_first_one_took():
    clock = FakeClock()
    b = Budget(100.0, estimate=lambda c: 5.0, clock=clock, repeat_safety=1.25)
    slow, other = _case("mnist_cnn"), _case("weather_gru")
    b.record(other, 5.0)
    b.record(slow, 20.0)                          # 4x its estimate; the run as a whole: 25 s for 10 estimated
    assert b.expected(slow, 1) == 20.0 and b.expected(other, 1) == 5.0
    assert b.expected(_case("gpt"), 0) == pytest.approx(5.0 * 2.5)   # a first process: estimate x the run's ratio
    clock.now += 100.0 - 24.0                     # 24 s left: a repeat of `slow` needs 20 x 1.25 = 25 s
    assert b.admit(slow, 1) == "process 2 does not fit"
    assert b.admit(other, 1) is None


def test_a_worker_is_stopped_at_the_line_less_the_reserve():
    clock = FakeClock()
    b = Budget(150.0, estimate=lambda c: 1.0, clock=clock, reserve_s=5.0)
    assert b.timeout(600.0) == 145.0
    clock.now += 140.0
    assert b.timeout(600.0) == 5.0
    clock.now += 30.0                             # past the line: the least timeout, never a negative one
    assert b.timeout(600.0) == 0.1
