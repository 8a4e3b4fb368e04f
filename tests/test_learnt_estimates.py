"""Issue 52 item 3: estimates learnt from what cases took on this machine (launch/history.py, plan/learnt.py).
A run keeps each ok process's wall time, case time and compile in a per-machine history; the next plan
(``--dry-run``, the budget) estimates from it and says so ("2 earlier process(es) here", "modelled, scaled
by ..."); the end of a run says its estimate against what its processes took and names the cases more
than 2x off. The workers are faked (``runner.run_one``): their durations are given, no clock is read and
nothing is timed."""

from __future__ import annotations

import dataclasses
import io
import json
import statistics
from pathlib import Path

import pytest
from rich.console import Console

from xpubench import api, envnames
from xpubench.case import Case
from xpubench.cli import main
from xpubench.cli.plan import print_plan
from xpubench.launch import history, runner
from xpubench.plan.estimate import case_seconds, describe
from xpubench.plan.learnt import Estimator, took_lines
from xpubench.results import store
from xpubench.results.schema import Run

ENV = {"host": {"cpu": {"model": "Test CPU 9000", "logical_cores": 2}, "memory_bytes": 8 << 30},
       "backends": {"numpy": {"installed": True, "version": "2.0.0", "devices": [{"id": "cpu", "kind": "cpu"}]}}}


def matmul_case(n: int, price: float | None = None) -> Case:
    return Case(workload="matmul", backend="numpy", device="cpu", mode="matmul", size=n,
                options={"price_per_hour": price} if price is not None else {})


def fake_workers(monkeypatch, took: dict[int, list[float]]):
    """runner.run_one replaced: the matmul of size N ends ok after took[N][process] seconds (its compile 2 s,
    its time in the case all but 1.5 s of it)."""
    def run_one(case, *, timeout_s, memory_limit_bytes=None, workdir=None, process=0, environment=None):
        seconds = took[case.size][process]
        return {"status": "ok", "metrics": {"warm_s": 0.01, "compile_s": 2.0, "case_s": seconds - 1.5}}, seconds

    monkeypatch.setattr(runner, "run_one", run_one)


@pytest.fixture
def kept(monkeypatch, tmp_path) -> Path:
    path = tmp_path / "cache" / "history.jsonl"
    monkeypatch.setenv(envnames.HISTORY, str(path))
    return path


def test_a_run_keeps_what_each_process_took_and_the_next_plan_learns_from_it(monkeypatch, tmp_path, kept):
    fake_workers(monkeypatch, {256: [40.0, 44.0]})
    said: list[str] = []
    hooks = api.RunHooks(on_timing=said.append, on_warning=lambda w: None)
    api.run(output=tmp_path / "a.jsonl", environment=ENV, hooks=hooks, workloads=["matmul"], backends=["numpy"],
            sizes=[256], processes=2)
    model = case_seconds(matmul_case(256), ENV)[0]
    lines = [json.loads(line) for line in kept.read_text().splitlines()]
    assert [(e["key"], e["duration_s"], e["case_s"], e["compile_s"]) for e in lines] == [
        ("matmul/numpy/cpu/matmul/fp32/n256", 40.0, 38.5, 2.0), ("matmul/numpy/cpu/matmul/fp32/n256", 44.0, 42.5, 2.0)]
    assert all(e["estimate_s"] == pytest.approx(model) for e in lines)
    # the end of the run: the estimate against what the processes took, and the case far off named
    assert said[0].startswith(f"time: estimated {describe(2 * model)}, took {describe(84.0)} (2 worker process(es) "
                              "of 1 case(s); estimates: 1 modelled; the whole run")
    assert said[1] == (f"more than 2x off: matmul/numpy/cpu/matmul/fp32/n256: estimated {describe(model)} per process "
                       "(modelled), took 40 s to 44 s")
    # the next plan: measured for that case (a price does not change what it takes), scaled for one like it
    guess = Estimator(ENV)
    seen, like = guess(matmul_case(256, price=2.0)), guess(matmul_case(512))
    assert (seen.basis, seen.seconds, seen.processes, seen.compile_s) == ("measured", 42.0, 2, 2.0)
    ratio = statistics.median([40.0 / model, 44.0 / model])
    assert like.basis == "scaled" and like.seconds == pytest.approx(case_seconds(matmul_case(512), ENV)[0] * ratio)
    # and --dry-run says which estimate is which
    console = Console(file=io.StringIO(), width=200, color_system=None)
    print_plan(api.plan(environment=ENV, workloads=["matmul"], backends=["numpy"], sizes=[256, 512], processes=2),
               console, None)
    out = console.file.getvalue()
    assert "2 earlier process(es) here" in out and "modelled, scaled by 2 like it here" in out
    assert f"estimated time: about {describe(2 * (42.0 + like.seconds))} (2 worker process(es) per case; 2 learnt " \
           "from earlier runs here)" in out


def test_the_budget_admits_by_the_learnt_estimate(monkeypatch, tmp_path, kept):
    fake_workers(monkeypatch, {256: [40.0]})
    api.run(output=tmp_path / "a.jsonl", environment=ENV, hooks=api.RunHooks(on_warning=lambda w: None),
            workloads=["matmul"], backends=["numpy"], sizes=[256], processes=1)
    fake_workers(monkeypatch, {256: [1.0]})
    (result,) = api.run(output=tmp_path / "b.jsonl", environment=ENV, hooks=api.RunHooks(on_warning=lambda w: None),
                        workloads=["matmul"], backends=["numpy"], sizes=[256], processes=1, budget_s=30)
    assert result.status == "skipped" and "needs about 40 s" in result.message   # the model said ~1 s: it would run


def test_the_history_is_this_machines_with_this_backends_versions(tmp_path):
    path = tmp_path / "history.jsonl"
    case = matmul_case(256)
    run = Run(case=case.as_dict(), status="ok", duration_s=12.0, metrics={"case_s": 10.0}, started_at="2026-12-01")
    recorder = history.Recorder(ENV, {case.run_id: 3.0}, path=path)
    recorder.add(run)
    recorder.add(dataclasses.replace(run, status="crash"))        # only ok processes are kept
    with path.open("a") as fh:
        fh.write("not json\n" + json.dumps({**json.loads(path.read_text().splitlines()[0]), "duration_s": -1}) + "\n")
    (entry,) = history.read(ENV, path)
    assert (entry.duration_s, entry.case_s, entry.estimate_s, entry.key) == (12.0, 10.0, 3.0, case.key)
    other_cpu = {**ENV, "host": {**ENV["host"], "cpu": {"model": "Other CPU", "logical_cores": 2}}}
    upgraded = {**ENV, "backends": {"numpy": {**ENV["backends"]["numpy"], "version": "2.1.0"}}}
    assert history.read(other_cpu, path) == [] and history.read(upgraded, path) == []
    assert history.read(ENV, path, environ={"OMP_NUM_THREADS": "1"}) == []   # thread variables change what runs


def test_no_history_where_it_is_turned_off_or_cannot_be_written(tmp_path):
    assert history.history_path({envnames.HISTORY: "off"}) is None
    assert history.history_path({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "xpubench" / "history.jsonl"
    run = Run(case=matmul_case(256).as_dict(), status="ok", duration_s=5.0)
    history.Recorder(ENV, {}, path=None).add(run)                 # off: nothing, no error
    blocked = tmp_path / "file"
    blocked.write_text("")
    recorder = history.Recorder(ENV, {}, path=blocked / "history.jsonl")
    recorder.add(run)
    assert recorder.problem and "cannot be written" in recorder.problem and "will not learn" in recorder.problem


def test_a_resumed_run_learns_from_its_own_file():
    case = matmul_case(1024)
    runs = [Run(case=case.as_dict(), status="ok", duration_s=s, metrics={"compile_s": 1.0}) for s in (7.0, 9.0)]
    runs.append(Run(case=case.as_dict(), status="timeout", duration_s=600.0))   # a failed process teaches nothing
    estimate = Estimator(ENV, entries=[], extra=history.entries_of(runs))(case)
    assert (estimate.basis, estimate.seconds, estimate.processes, estimate.compile_s) == ("measured", 8.0, 2, 1.0)


def test_processes_of_a_run_on_a_busy_machine_teach_only_where_no_quiet_one_did(tmp_path):
    """Seen here: a llama sweep run while other work kept the CPU busy took 15 min; the quiet one after it was
    estimated 43 min from it and took 4. The history keeps each run's busy share; the estimate learns from the
    quiet processes where there are any, else says it learnt from a busy machine."""
    path = tmp_path / "history.jsonl"
    case, other = matmul_case(256), matmul_case(512)
    recorder = history.Recorder(ENV, {case.run_id: 4.0, other.run_id: 4.0}, path=path)
    for c, seconds, busy in ((case, 40.0, 1.0), (case, 10.0, 0.05), (case, 12.0, None), (case, 50.0, 0.9),
                             (other, 30.0, 0.8)):
        recorder.add(Run(case=c.as_dict(), status="ok", duration_s=seconds, fingerprint={"cpu_busy_at_start": busy}))
    entries = history.read(ENV, path)
    assert [e.busy for e in entries] == [1.0, 0.05, None, 0.9, 0.8]
    estimate = Estimator(ENV, entries=entries)
    quiet, busy = estimate(case), estimate(other)
    assert (quiet.seconds, quiet.processes, quiet.busy) == (11.0, 2, False)   # the two quiet ones, not 40 and 50
    assert quiet.source() == "2 earlier process(es) here"
    assert (busy.seconds, busy.busy) == (30.0, True)
    assert busy.source() == "1 earlier process(es) here while the machine was busy"
    unseen = matmul_case(2048)                                      # scaled by the quiet processes' ratios only
    assert estimate(unseen).basis == "scaled" and estimate.ratios[("matmul", "numpy", "cpu", "matmul")] == [2.5, 3.0]


def test_the_end_of_a_run_names_only_the_cases_more_than_2x_off():
    llamacpp, torch, skipped = matmul_case(256), matmul_case(512), matmul_case(1024)
    guess = Estimator(ENV, entries=[])
    estimates = {c.run_id: dataclasses.replace(guess(c), seconds=s)
                 for c, s in ((llamacpp, 20.0), (torch, 60.0), (skipped, 30.0))}
    runs = [Run(case=llamacpp.as_dict(), status="ok", duration_s=s) for s in (197.0, 404.0, 250.0)]
    runs += [Run(case=torch.as_dict(), status="ok", duration_s=s) for s in (70.0, 90.0)]
    runs += [Run(case=skipped.as_dict(), status="skipped", duration_s=0.0)]   # skipped: took nothing
    first, off = took_lines(runs, estimates, elapsed_s=1100.0)
    assert first == ("time: estimated 3 min, took 17 min (5 worker process(es) of 2 case(s); estimates: 2 modelled; "
                     "the whole run 19 min)")   # 3 x 20 s + 2 x 60 s; 1011 s
    assert off == ("more than 2x off: matmul/numpy/cpu/matmul/fp32/n256: estimated 20 s per process (modelled), "
                   "took 4 min to 7 min")   # 197 to 404 s, median 250 s: 12.5x; the other case 1.33x
    assert took_lines([runs[-1]], estimates) == []   # nothing ran: nothing to say


@pytest.mark.slow
def test_a_real_run_prints_its_cost_and_its_estimate_against_what_it_took(tmp_path, kept, capsys, detected_once):
    out = tmp_path / "r.jsonl"
    args = ["run", "-w", "matmul", "-b", "numpy", "--size", "64", "--processes", "1", "--price-per-hour", "cpu=0.10"]
    assert main([*args, "-o", str(out), "--no-progress"]) == 0
    said = capsys.readouterr().out
    assert "Cost at $0.10 per device-hour" in said and "PFLOP" in said
    last = said.rstrip().splitlines()[-2:]   # the run's last line, or the one before the cases more than 2x off
    assert last[-1].startswith("time: estimated ") or (last[0].startswith("time: estimated ")
                                                       and last[-1].startswith("more than 2x off: "))
    (run,) = store.load_file(out).runs
    assert 0 < run.metrics["case_s"] < run.duration_s   # the worker's time in its case, its start apart
    (entry,) = [json.loads(line) for line in kept.read_text().splitlines()]
    assert entry["duration_s"] == run.duration_s and entry["case_s"] == run.metrics["case_s"]
    assert main([*args, "--dry-run"]) == 0
    assert "1 earlier process(es) here" in capsys.readouterr().out
