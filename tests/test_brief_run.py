"""The brief default run (issue 32 items 2, 4, 7): few cases, each with room for 2 processes in the 150 s
budget so the answer's comparisons have an interval, the accelerator first, one line for what was left out
and `--all` for it; a brief bandwidth measured by the run itself; no ceiling warning before the cases.
Planned on recorded machines (this project's EPYC VM, a TPU v5e host); nothing is measured here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xpubench import api
from xpubench.backends.envfile import load_environment
from xpubench.devices.device import is_accelerator
from xpubench.launch.budget import RESERVE_S, Budget, preview
from xpubench.plan import PlanRequest, build_cases
from xpubench.plan.brief import MIN_PROCESSES, OVERHEAD_S
from xpubench.plan.estimate import case_seconds
from xpubench.plan.notes import plan_notes
from xpubench.plan.request import BRIEF_BUDGET_S

DATA = Path(__file__).parent / "data"


def epyc() -> dict:
    """The environment of the 2-core EPYC VM, as its recorded default run's fingerprint holds it."""
    fp = json.loads((DATA / "runs" / "default-zen4.jsonl").read_text().splitlines()[0])["fingerprint"]
    return {"host": fp["host"], "backends": fp["backends"]}


def comparisons(cases) -> dict[tuple, set]:
    out: dict[tuple, set] = {}
    for c in cases:
        out.setdefault((c.workload, c.mode, c.precision, c.size, c.device.split(":")[0] == "cpu"), set()).add(c.backend)
    return out


def test_the_default_run_plans_few_comparisons_with_room_for_two_processes_each():
    env = epyc()
    cases = build_cases(PlanRequest(quick=True), env)
    full = build_cases(PlanRequest(quick=True, all_cases=True), env)
    assert len(cases) < len(full) / 2
    assert {c.workload for c in cases} >= {"llama", "matmul", "mnist_cnn"}
    for key, backends in comparisons(cases).items():
        assert len(backends) >= 2, key              # every row kept compares two backends or more
    seconds = sum(MIN_PROCESSES * case_seconds(c, env)[0] for c in cases)
    assert seconds + OVERHEAD_S + RESERVE_S <= BRIEF_BUDGET_S
    ran, skipped = preview(cases, MIN_PROCESSES, BRIEF_BUDGET_S, lambda c: case_seconds(c, env)[0])
    assert skipped == [] and all(ran[c.key] == MIN_PROCESSES for c in cases)
    [line] = [n for n in plan_notes(PlanRequest(quick=True), env, cases) if n.startswith("brief run")]
    assert "`xpubench run --all`" in line and "cifar10_resnet" in line and "N=1024" in line


def test_a_smaller_budget_keeps_fewer_comparisons_never_one_side_alone():
    """One side alone compares nothing, but a generation's, which is measured against its bandwidth bound."""
    env = epyc()
    cases = build_cases(PlanRequest(quick=True, budget_s=60), env)
    assert 0 < len(cases) < len(build_cases(PlanRequest(quick=True), env))
    assert all(len(b) >= 2 for (_, mode, *_), b in comparisons(cases).items() if mode != "generate")


def test_the_brief_llama_row_is_torch_compiled_or_left_out_with_the_reason():
    """Issue 52 item 2: the default run's torch llama case compiles its decode step, as JAX's is jitted (and
    `-w llama`'s is): like with like. Where 2 of its processes do not fit the budget with the rest (by the
    plan's estimate, its cold compile included), it is not measured, and the brief line says so with the
    estimate, while JAX's llama row still runs (a generation stands alone against its bandwidth bound)."""
    env = epyc()
    planned = build_cases(PlanRequest(quick=True), env)
    torch_llama = [c for c in planned if (c.workload, c.backend) == ("llama", "torch")]
    assert [c.options["decode"] for c in torch_llama] == ["compiled"]
    assert case_seconds(torch_llama[0], env)[0] < 45    # its 4 layers' compile: ~13 s modelled, not a CNN's 30
    req = PlanRequest(quick=True, budget_s=60)
    cases = build_cases(req, env)
    assert {(c.workload, c.backend) for c in cases if c.mode == "generate"} == {("llama", "jax")}
    [line] = [n for n in plan_notes(req, env, cases) if n.startswith("brief run")]
    said = line.split("; not measured, ")[1]
    assert "do not fit the 60 s budget" in said and "llama generate on torch cpu (est. " in said, line
    assert "llama" not in line.split("; not measured, ")[0]     # not in the --all list: it did not fit


def test_naming_a_workload_or_all_plans_the_full_sweep():
    env = epyc()
    assert {c.workload for c in build_cases(PlanRequest(quick=True, all_cases=True), env)} >= {"fashion_cnn", "gpt"}
    assert {c.size for c in build_cases(PlanRequest(quick=True, workloads=["matmul"]), env)} == {1024, 2048}
    assert not [n for n in plan_notes(PlanRequest(quick=True, all_cases=True), env, []) if n.startswith("brief")]


def test_with_an_accelerator_it_comes_first_and_the_budget_keeps_every_accelerator_case():
    """On a TPU v5e host the old default plan's 150 s dropped accelerator cases (weather_gru, gpt on tpu:0)."""
    env = load_environment(str(DATA / "machines" / "tpu-v5e-8.json"))
    cases = build_cases(PlanRequest(quick=True), env)
    accel = [c for c in cases if is_accelerator(c.device)]
    assert accel and cases[:len(accel)] == accel                      # the plan lists them first
    assert {c.workload for c in cases if not is_accelerator(c.device)} == {"matmul"}   # the CPU: briefly
    estimate = lambda c: case_seconds(c, env)[0]
    assert {c.key for c in Budget(150, estimate).order(cases)[:len(accel)]} == {c.key for c in accel}   # run first
    ran, skipped = preview(cases, MIN_PROCESSES, BRIEF_BUDGET_S, estimate)
    assert not [k for k in skipped if "tpu" in k] and all(ran[c.key] == MIN_PROCESSES for c in accel)


def test_a_generation_run_measures_a_brief_bandwidth_when_none_is_known(monkeypatch, tmp_path):
    from xpubench.analysis.generation import add_generation_bounds
    from xpubench.case import Case
    from xpubench.ceilings import measure, runtime
    from xpubench.harness.bandwidth import Bandwidth, KernelRate

    asked = []

    def fake(backend, device, *, measurements, budget_s, **kw):
        asked.append((backend, device, measurements, budget_s))
        kernels = {"copy": KernelRate("copy", "c = a", 2**29, 16.0, 18.0, 0.1),
                   "triad": KernelRate("triad", "a = b + s * c", 3 * 2**28, 15.0, 20.0, 0.1),
                   "bad": KernelRate("bad", "wrong", 2**28, 0.0, 0.0, 0.0, error="wrong result")}
        return [Bandwidth(backend, device, 2**28, 16.0, kernels, elapsed_s=1.6)] * measurements

    monkeypatch.setattr(measure, "brief_bandwidths", fake)
    cases = [Case("llama", b, "cpu", "generate", "fp32", batch_size=1) for b in ("torch", "jax")]
    record = {"ceilings": {}, "bandwidth": {}, "missing": [], "note": None}
    runtime.brief_bandwidth(record, epyc(), cases + [Case("matmul", "numpy", "cpu", "matmul", "fp32", size=64)],
                            path=tmp_path / "ceilings.json", refresh=False)
    assert asked == [("torch", "cpu", runtime.BRIEF_MEASUREMENTS, runtime.BRIEF_BANDWIDTH_S)]  # one per device
    assert record["bandwidth"]["torch/cpu"]["bytes_per_s"] == 20e9   # the fastest window (a ceiling), not 16
    metrics = {"decode_tokens_per_s": 20.0, "decode_bytes_per_token": 200e6}
    add_generation_bounds(metrics, cases[1], {"ceilings": record})
    assert metrics["pct_of_bandwidth_bound"] == pytest.approx(0.2)
    assert "a run's brief one, the median of 3 measurements' fastest windows; measured for this run, ±0%" in \
        metrics["bound_bandwidth_source"]
    runtime.brief_bandwidth(record, epyc(), cases, path=tmp_path / "ceilings.json")   # known now: not measured again
    assert len(asked) == 1


def test_a_failed_brief_bandwidth_is_one_note_and_the_share_stays_na(monkeypatch, tmp_path):
    from xpubench.case import Case
    from xpubench.ceilings import measure, runtime

    def broken(*a, **kw):
        raise RuntimeError("ceiling measurement of torch on cpu failed: no memory")

    monkeypatch.setattr(measure, "brief_bandwidths", broken)
    record = {"ceilings": {}, "bandwidth": {}, "missing": [], "note": None}
    notes = []
    runtime.brief_bandwidth(record, epyc(), [Case("llama", "torch", "cpu", "generate", "fp32", batch_size=1)],
                            on_note=notes.append, path=tmp_path / "ceilings.json", refresh=False)
    assert record["bandwidth"] == {} and len(notes) == 1 and "`xpubench ceilings`" in notes[0]


def test_the_run_does_not_warn_about_ceilings_before_its_cases(monkeypatch, tmp_path):
    from xpubench.launch import runner

    monkeypatch.setattr(runner, "run_cases", lambda cases, out, **kw: [])
    env = {"host": {}, "backends": {"numpy": {"installed": True, "devices": [{"id": "cpu", "kind": "cpu"}]}}}
    said = []
    api.run(output=tmp_path / "a.jsonl", environment=env, workloads=["matmul"], sizes=[64],
            hooks=api.RunHooks(on_warning=said.append))
    assert not [w for w in said if "ceiling" in w], said
