"""PyTorch DistributedDataParallel on the CPU (gloo), launched by torchrun's engine; scaling figures.

The DDP ranks are spawned processes that import this module (for ``_step_then_boom``): the analysis and CLI
modules are imported inside the tests that use them, not by every rank."""

from __future__ import annotations

import pickle
import re
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import this_machine

from xpubench.case import Case

torch = pytest.importorskip("torch")

CASE = Case(workload="mnist_cnn", backend="torch", device="cpu", mode="train", batch_size=32, devices=2,
            epochs=1, steps=1, train_samples=256, eval_samples=64)


def _without_dropout(model) -> None:
    """Each rank draws its own dropout masks: no single-process step can match them, so the
    equivalence check turns dropout off (p = 0) in both."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0


def _one_step(case, rank=0, world=1):
    """One optimizer step of the production trainer; DDP-wrapped when world > 1."""
    from torch.nn.parallel import DistributedDataParallel

    from xpubench.backends.torch_.train import TorchTrainer

    trainer = TorchTrainer(case, world_size=world, rank=rank, wrap=DistributedDataParallel if world > 1 else None)
    _without_dropout(trainer.model)
    trainer.start_epoch(0)
    loss = float(trainer.step(0))
    params = {k: v.detach().clone().numpy() for k, v in trainer.model.named_parameters()}
    first_moment = [trainer.opt.state[p]["exp_avg"].clone().numpy() for p in trainer.model.parameters()]
    return loss, params, first_moment


def _step_then_boom(case, rank, world, folder):
    """``_one_step`` on every rank, kept in ``folder`` (both ranks past a barrier once both are written), then
    rank 1 raises while rank 0 waits in a collective rank 1 never joins (the launch must end it, not hang): one
    launch of two ranks (each a spawned process importing torch, ~4 CPU s) serves both the equivalence test and
    the failure test."""
    with open(f"{folder}/rank{rank}.pkl", "wb") as fh:
        pickle.dump(_one_step(case, rank, world), fh)
    torch.distributed.barrier()
    if rank == 1:
        raise ValueError("boom in rank 1")
    torch.distributed.barrier()


@pytest.fixture(scope="module")
def step_then_failure(tmp_path_factory) -> tuple[Exception | None, dict]:
    """(what ddp.launch raised, {rank: its _one_step result}) of one launch of _step_then_boom."""
    from xpubench.backends.torch_ import ddp

    folder = tmp_path_factory.mktemp("ddp-ranks")
    failure = None
    try:
        ddp.launch(CASE, _step_then_boom, str(folder))
    except Exception as exc:  # noqa: BLE001 - asserted by test_an_exception_in_one_rank_is_the_case_error
        failure = exc
    ranks = {}
    for path in folder.glob("rank*.pkl"):
        with path.open("rb") as fh:
            ranks[int(path.stem.removeprefix("rank"))] = pickle.load(fh)
    return failure, ranks


@pytest.mark.slow
def test_two_process_ddp_step_equals_one_process_step_on_the_global_batch(step_then_failure):
    """(The ranks' layout, gloo and their threads, is asserted on a real run's record in
    test_scaling_run_records_n1_and_n2_with_efficiency.)"""
    import dataclasses

    _, ranks = step_then_failure
    assert sorted(ranks) == [0, 1]
    (loss0, p0, m0), (loss1, p1, _) = ranks[0], ranks[1]
    loss_ref, p_ref, m_ref = _one_step(dataclasses.replace(CASE, devices=1, batch_size=64))
    assert (loss0 + loss1) / 2 == pytest.approx(loss_ref, rel=1e-5)   # each rank's loss is on its half
    for name in p_ref:
        np.testing.assert_array_equal(p0[name], p1[name])                # replicas stay identical
        np.testing.assert_allclose(p0[name], p_ref[name], rtol=0, atol=1e-5, err_msg=name)
    for a, b in zip(m0, m_ref):   # Adam's first moment = 0.1 x the averaged gradient
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-9)


@pytest.mark.slow
def test_an_exception_in_one_rank_is_the_case_error(step_then_failure):
    failure, _ = step_then_failure
    assert isinstance(failure, RuntimeError), repr(failure)
    assert re.search(r"rank 1 failed: ValueError: boom in rank 1", str(failure)), failure


@pytest.mark.slow
def test_scaling_run_records_n1_and_n2_with_efficiency(tmp_path, capsys, monkeypatch, one_thread_workers):
    """``xpubench run --scaling`` called in this process (its cases still run in worker processes, N=2 as
    two DDP ranks), for the machine detected once per test run (conftest.this_machine)."""
    from xpubench import analysis, cli

    env = this_machine()
    monkeypatch.setattr("xpubench.api.detect_environment", lambda **_: env)
    monkeypatch.setenv("COLUMNS", "200")
    out = tmp_path / "scaling.jsonl"
    assert cli.main(["run", "--processes", "1", "-w", "mnist_cnn", "-b", "torch", "--scaling", "--batch-size", "32",
                     "--steps", "3", "--epochs", "2", "--train-samples", "192", "--eval-samples", "64", "-o", str(out),
                     "--no-progress", "--verbose"]) == 0
    stdout = capsys.readouterr().out
    (loaded,) = analysis.load([out])     # the efficiency is derived on loading (analysis/scaling.py)
    results = sorted(loaded.results, key=lambda r: r.case.devices)
    assert [r.case.devices for r in results] == [1, 2]
    one, two = results
    for r in results:
        assert r.status == "ok", r.message
    assert (two.metrics["devices"], two.metrics["per_device_batch"], two.metrics["global_batch"]) == (2, 32, 64)
    assert two.metrics["world_size"] == 2 and two.metrics["ddp_backend"] == "gloo"
    assert two.metrics["threads_per_process"] >= 1   # each rank's share of the cores (ddp._rank_main)
    assert two.metrics["scaling_efficiency"] == pytest.approx(
        two.metrics["samples_per_s"] / (2 * one.metrics["samples_per_s"]))
    assert two.metrics["scaling_base_devices"] == 1 and "scaling_efficiency" not in one.metrics
    assert "Data-parallel scaling" in stdout and "vs N=1" in stdout


def test_torch_data_parallel_inference_is_skipped_with_a_reason():
    from xpubench.launch.dispatch import run_case

    outcome = run_case(Case(workload="mnist_cnn", backend="torch", device="cpu", mode="infer", batch_size=8,
                            devices=2))
    assert outcome.status == "skipped" and "--devices 1" in outcome.message


def _result(devices, thr, status="ok", **case):
    c = Case(**{"workload": "mnist_cnn", "backend": "jax", "device": "cpu", "mode": "train", "precision": "fp32",
                "batch_size": 16, "data": "synthetic", "compile": "auto", "seed": 0, "devices": devices, **case})
    return SimpleNamespace(case=c, status=status, metrics={"samples_per_s": thr})


def test_scaling_efficiency_uses_the_fewest_matching_devices():
    from xpubench.analysis import scaling

    earlier = [_result(2, 150.0), _result(1, 100.0), _result(1, 999.0, batch_size=32),
               _result(1, 999.0, status="error")]
    this = _result(4, 300.0)
    scaling.annotate(this.metrics, this.case, earlier)
    m = this.metrics
    assert not {"devices", "per_device_batch", "global_batch"} & set(m)   # the case's, read on the case
    assert m["scaling_base_devices"] == 1 and m["scaling_speedup"] == pytest.approx(3.0)
    assert m["scaling_efficiency"] == pytest.approx(0.75) and "share the same cores" in m["scaling_note"]
    alone = _result(8, 10.0, device="gpu:0")
    scaling.annotate(alone.metrics, alone.case, earlier)
    assert "scaling_efficiency" not in alone.metrics and alone.case.global_batch == 128


@pytest.mark.parametrize(("lr_scaling", "world", "factor"), [(False, 2, 1), (True, 2, 2), (True, 1, 1)])
def test_lr_scaling_multiplies_the_step_size_by_the_device_count(lr_scaling, world, factor):
    """Adam's first update moves every parameter with a gradient by lr x g / |g| = +-lr, so the largest
    change after one step is the learning rate actually used. (One rank of ``world`` without a process
    group: the step is that rank's own; the rate is what --lr-scaling chose.)"""
    import dataclasses

    from xpubench.backends.torch_.train import TorchTrainer

    case = dataclasses.replace(CASE, devices=world, options={"lr_scaling": True} if lr_scaling else {})
    trainer = TorchTrainer(case, world_size=world, rank=0)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.start_epoch(0)
    trainer.step(0)
    moved = max(float((p.detach() - b).abs().max()) for p, b in zip(trainer.model.parameters(), before))
    lr = trainer.spec.learning_rate * factor
    assert trainer.opt.param_groups[0]["lr"] == pytest.approx(lr)
    assert moved == pytest.approx(lr, rel=1e-3)
