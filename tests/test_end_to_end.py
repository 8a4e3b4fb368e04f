"""The tool end to end on this CPU: the CLI plans, runs every case in a worker, prints the tables and
writes a result file the loader reads back."""

from __future__ import annotations

import dataclasses

import pytest
from batch_worker import run_cases
from conftest import this_machine

import xpubench
from xpubench import cli
from xpubench.plan import PlanRequest, build_cases
from xpubench.results.store import load_file
from xpubench.workloads import names

RECURRENT = {"weather_gru", "shakespeare_lstm"}   # sequences of 1,344 and 100 steps


@pytest.fixture
def xpubench_cli(detected_once, monkeypatch, capsys):
    """``xpubench ARGS`` in this process (its cases still run in worker processes), on the machine detected
    once per test run: (exit code, stdout, stderr). The CLI's own process is other tests' subject."""
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args: str) -> tuple[int, str, str]:
        code = cli.main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.mark.slow
def test_matmul_runs_on_every_backend_with_cold_and_warm_figures(tmp_path, xpubench_cli):
    # one size: each case is a worker process (a framework import), and nothing here depends on the size
    out = tmp_path / "mm.jsonl"
    code, stdout, stderr = xpubench_cli("run", "--processes", "1", "-w", "matmul", "-d", "cpu", "--size",
                                        "128", "--time-budget", "0.3", "-o", str(out))
    assert code == 0, stderr
    results = load_file(out).results
    backends = {r.case.backend for r in results}
    assert backends == {"numpy", "torch", "jax"}
    assert {r.case.precision for r in results if r.case.backend == "jax"} >= {"fp32", "bf16", "fp16"}
    for r in results:
        assert r.status == "ok", (r.key, r.message)
        m = r.metrics
        assert 0 < m["warm_s"] and 0 < m["cold_s"]
        assert m["warm_flops_per_s"] == pytest.approx(2 * r.case.size ** 3 / m["warm_s"])
        assert len(r.samples["warm_s"]) >= 3 and r.placement == "cpu"
        assert r.fingerprint["xpubench"] == xpubench.__version__ and r.fingerprint["packages"]["torch"]
        assert r.fingerprint["host"]["cpu"]["peak_estimate"]["fp32"]["basis"].startswith("estimate")
    assert "GFLOP/s" in stdout and "fastest" in stdout and "matmul: fastest here" in stdout
    assert "bf16" in stdout.split("Answer:")[0]           # the dtype is in the summary
    assert stdout.count("numpy") >= 2 and stdout.count("jax") >= 6


@pytest.mark.slow
def test_batch_size_sweep_prints_the_seeds_table(tmp_path, one_thread_workers, xpubench_cli):
    out = tmp_path / "sweep.jsonl"
    code, stdout, stderr = xpubench_cli("run", "--processes", "1", "-w", "mnist_cnn", "-b", "torch", "-d", "cpu",
                                        "--batch-size", "64,32", "--epochs", "3", "--steps", "3",
                                        "--eval-samples", "64", "-o", str(out))
    assert code == 0, stderr
    results = load_file(out).results
    assert [r.case.batch_size for r in results] == [32, 64]          # ascending
    for r in results:
        m = r.metrics
        assert r.status == "ok" and m["epochs_run"] == 3 and m["steps_per_epoch"] == 3
        assert m["sync"] == "step" and m["matmul_precision"] == "highest"     # the CPU default; true fp32
        assert m["first_epoch_s"] > 0 and m["epoch_s"] > 0 and m["step_p90_s"] >= m["step_s"] > 0
        assert len(r.samples["step_s"]) == 6 and len(r.samples["first_epoch_step_s"]) == 3  # first apart
        assert len(r.series["val_metric"]) == 3
    assert "b32" in stdout and "b64" in stdout and "samples/s" in stdout
    assert "mnist_cnn: fastest here torch cpu (the only backend/device measured)" in stdout


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_every_workload_trains_in_both_frameworks(backend, one_thread_workers):
    # the pipelined mode (one sync per steady epoch; the default on accelerators) with every trainer, on a batch
    # of 2 for all (half the smallest quick batch, weather_gru's 4; two rows still give batch norm a batch) and one
    # evaluation batch (the recurrent models' forward and backward passes over their long sequences, 1,344 steps
    # for weather_gru, are much of this test's time): the statement does not depend on them. The
    # framework's planned cases run one after another in one worker process, each as launch/worker.py runs
    # its case (tests/batch_worker.py): 2 process starts and framework imports instead of 12; the CLI and
    # api.run around the worker are the other tests' subject here. JAX's worker compiles at XLA's level 0, except
    # the recurrent models, whose steps cost more there than their compile saves (quick_compile.most_optimizations)
    request = PlanRequest(workloads=names("model"), backends=[backend], devices=["cpu"], quick=True,
                          batch_sizes=[2], epochs=2, steps=2, eval_samples=2, options={"sync": "epoch"})
    cases = build_cases(request, this_machine())
    assert {(c.workload, c.backend) for c in cases} == {(w, backend) for w in names("model")}
    items = cases
    if backend == "jax":
        recurrent = [c for c in cases if c.workload in RECURRENT]
        items = [("quick_compile:most_optimizations", False),
                 *(c for c in cases if c not in recurrent), ("quick_compile:most_optimizations", True), *recurrent]
    outcomes = {id(item): o for item, o in zip(items, run_cases(items), strict=True)}
    for case, r in ((c, outcomes[id(c)]) for c in cases):
        key = case.key
        assert r["status"] == "ok", (key, r["message"])
        assert r["metrics"]["samples_per_s"] > 0 and r["metrics"]["achieved_flops_per_s"] > 0, key
        assert r["metrics"]["final_loss"] is not None, key
        assert r["metrics"]["sync"] == "epoch" and r["metrics"]["epochs_run"] == 2, key
        # one step sample per steady epoch: its time / its steps
        assert r["samples"]["step_s"] == pytest.approx([r["metrics"]["epoch_s"] / 2]), key


@pytest.mark.slow
def test_sync_and_download_flags_reach_the_cases(tmp_path):
    from xpubench.cli import build_parser
    from xpubench.cli.run import request_from
    from xpubench.errors import UserError

    def request(*flags):
        return request_from(build_parser().parse_args(["run", "-w", "mnist_cnn", *flags]))[0]

    assert request("--sync", "epoch").options == {"sync": "epoch"}
    assert "sync" not in request().options            # the device's default, decided in the worker
    data = tmp_path / "data" / "new"
    req = request("--data", "real", "--data-dir", str(data), "--download")
    assert req.options == {"download": True} and data.is_dir()   # created, for the download to fill
    with pytest.raises(UserError, match="--data real"):
        request("--download")
    with pytest.raises(UserError, match="invalid choice"):
        request("--sync", "never")


@pytest.mark.slow
def test_torch_compile_time_is_timed_apart_and_its_warm_up_step_undone(monkeypatch):
    """compile="on": compile_s is one warm-up step of the compiled model, whose update is undone (the
    first timed step then equals eager's). Dynamo's "eager" backend keeps it cheap; inductor is the same
    code path with a longer compile."""
    torch = pytest.importorskip("torch")
    from xpubench.backends.torch_.train import TorchTrainer
    from xpubench.case import Case

    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model: compile_(model, backend="eager"))
    case = Case(workload="mnist_cnn", backend="torch", device="cpu", mode="train", batch_size=8,
                train_samples=32, eval_samples=8, epochs=1, steps=2)
    eager, compiled = TorchTrainer(case), TorchTrainer(dataclasses.replace(case, compile="on"))
    assert eager.compile() is None
    before, rng = {k: v.clone() for k, v in compiled.model.state_dict().items()}, torch.random.get_rng_state()
    compile_s = compiled.compile()
    assert compile_s is not None and compile_s > 0
    for k, v in compiled.model.state_dict().items():
        assert torch.equal(v, before[k]), k            # the warm-up update is undone
    assert not compiled.opt.state                      # and Adam's moments with it
    assert torch.equal(torch.random.get_rng_state(), rng)   # and the dropout masks it drew
    losses = []
    for t in (eager, compiled):
        t.start_epoch(0)
        torch.manual_seed(1)                           # the two trainers share the global RNG
        losses.append([float(t.step(i)) for i in range(2)])
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)
