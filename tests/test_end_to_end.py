"""The tool end to end on this CPU: the CLI plans, runs every case in a worker, prints the tables and
writes a result file the loader reads back."""

from __future__ import annotations

import subprocess
import sys

import pytest

import xpubench
from xpubench.results.store import load_file
from xpubench.workloads import MODEL_WORKLOADS


def xpubench_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "xpubench", *args], capture_output=True, text=True,
                          timeout=timeout, check=False, env={"COLUMNS": "200", **_env()})


def _env() -> dict:
    import os

    return dict(os.environ)


def test_matmul_runs_on_every_backend_with_cold_and_warm_figures(tmp_path):
    out = tmp_path / "mm.jsonl"
    proc = xpubench_cli("run", "-w", "matmul", "--size", "128,256", "--time-budget", "0.3", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    results = load_file(out).results
    backends = {r.case["backend"] for r in results}
    assert backends == {"numpy", "torch", "jax"}
    assert {r.case["precision"] for r in results if r.case["backend"] == "jax"} >= {"fp32", "bf16", "fp16"}
    for r in results:
        assert r.status == "ok", (r.key, r.message)
        m = r.metrics
        assert 0 < m["warm_s"] and 0 < m["cold_s"]
        assert m["warm_flops_per_s"] == pytest.approx(2 * r.case["size"] ** 3 / m["warm_s"])
        assert len(r.samples["warm_s"]) >= 3 and r.placement == "cpu"
        assert r.fingerprint["xpubench"] == xpubench.__version__ and r.fingerprint["packages"]["torch"]
        assert r.fingerprint["host"]["cpu"]["peak_estimate"]["fp32"]["basis"].startswith("estimate")
    assert "cold GFLOP/s" in proc.stdout and "warm GFLOP/s" in proc.stdout
    assert proc.stdout.count("numpy") >= 2 and proc.stdout.count("jax") >= 6


def test_batch_size_sweep_prints_the_seeds_table(tmp_path):
    out = tmp_path / "sweep.jsonl"
    proc = xpubench_cli("run", "-w", "mnist_cnn", "-b", "torch", "--batch-size", "64,32", "--epochs", "3",
                        "--steps", "3", "--eval-samples", "64", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    results = load_file(out).results
    assert [r.case["batch_size"] for r in results] == [32, 64]          # ascending
    for r in results:
        m = r.metrics
        assert r.status == "ok" and m["epochs_run"] == 3 and m["steps_per_epoch"] == 3
        assert m["first_epoch_s"] > 0 and m["epoch_s"] > 0 and m["step_p90_s"] >= m["step_s"] > 0
        assert len(r.samples["step_s"]) == 6 and len(r.samples["first_epoch_step_s"]) == 3  # first apart
        assert len(r.series["val_metric"]) == 3
    assert "1st epoch s" in proc.stdout and "step ms" in proc.stdout


def test_every_workload_trains_in_both_frameworks(tmp_path):
    results = xpubench.run(workloads=list(MODEL_WORKLOADS), backends=["torch", "jax"], quick=True, epochs=2,
                           steps=2, output=tmp_path / "all.jsonl")
    assert {(r.case["workload"], r.case["backend"]) for r in results} == {
        (w, b) for w in MODEL_WORKLOADS for b in ("torch", "jax")}
    for r in results:
        assert r.status == "ok", (r.key, r.message)
        assert r.metrics["samples_per_s"] > 0 and r.metrics["achieved_flops_per_s"] > 0, r.key
        assert r.metrics["final_loss"] is not None, r.key
