"""Every device path end to end, on the device: ``python -m pytest -m gpu`` (or ``tpu``, ``mps``) on a
machine that has one (docs/accelerators.md says what to send back). Skipped elsewhere (conftest.py).
Each test drives the CLI as a user would and checks what only the device can show: the cases run
there (placement), precisions are what they say, memory figures exist, nothing falls back. Quickest
first, every workload last: scripts/accelerator_check.sh runs them in file order in what is left of a
short job (``-o addopts=``: no plugin needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import device_kinds, machine_environment

PATHS = [pytest.param("gpu", "torch", marks=pytest.mark.gpu), pytest.param("gpu", "jax", marks=pytest.mark.gpu),
         pytest.param("tpu", "jax", marks=pytest.mark.tpu), pytest.param("mps", "torch", marks=pytest.mark.mps)]
PRECISIONS = "fp32,tf32,bf16,fp16,int8"
ALLOWED_SKIPS = ("tf32 ", "int8", "PyTorch's int8 kernels", "XLA:GPU has no int8 convolution", "int8 covers only")


def needs(kind: str, backend: str) -> None:
    if kind not in device_kinds(machine_environment(), backend):
        pytest.skip(f"{backend} sees no {kind} device here")


def xpubench(*args: str, timeout: int = 3600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "xpubench", *args], capture_output=True, text=True,
                          timeout=timeout, check=False, env=dict(os.environ, COLUMNS="200"))


def results(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check_results(rows: list[dict], device: str) -> None:
    assert rows
    for r in rows:
        if r["status"] == "skipped":
            assert any(s in r["message"] for s in ALLOWED_SKIPS), (r["case"]["key"], r["message"])
            continue
        assert r["status"] == "ok", (r["case"]["key"], r["status"], r["message"])
        assert r["placement"].split(" ")[0].split("..")[0] == device or r["case"]["devices"] > 1, r["placement"]


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "backend"), PATHS)
def test_the_default_matmul_sweep_stays_below_the_spec_peak(kind, backend, tmp_path):
    needs(kind, backend)
    out = tmp_path / "mm.jsonl"
    proc = xpubench("run", "-d", kind, "-b", backend, "-w", "matmul", "--quick", "--no-progress", "-o", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = results(out)
    check_results(rows, rows[0]["case"]["device"])
    for r in rows:
        share = r["metrics"].get("pct_of_peak")
        assert share is None or share <= 1.0, (r["case"]["key"], share)


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "backend"), PATHS)
def test_doctor_passes_on_the_device(kind, backend):
    needs(kind, backend)
    proc = xpubench("doctor", "-d", kind, "-b", backend, "--json", timeout=900)
    rows = json.loads(proc.stdout)
    failed = [r for r in rows if r["status"] == "FAIL"]
    assert proc.returncode == 0 and not failed, failed


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "backend"), PATHS)
def test_data_parallel_over_two_devices(kind, backend, tmp_path):
    needs(kind, backend)
    env = machine_environment()
    have = sum(d["kind"] == kind for d in env["backends"][backend]["devices"])
    if have < 2:
        pytest.skip(f"{backend} sees {have} {kind} device(s)")
    out = tmp_path / "dp.jsonl"
    proc = xpubench("run", "-d", kind, "-b", backend, "-w", "mnist_cnn", "--quick", "--devices", "2",
                    "--no-progress", "-o", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = [r for r in results(out) if r["case"]["precision"] == "fp32"]
    assert row["status"] == "ok" and row["metrics"]["devices"] == 2, row["message"]


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_the_second_gpu_is_the_one_measured(backend, tmp_path):
    env = machine_environment()
    if sum(d["kind"] == "gpu" for d in env.get("backends", {}).get(backend, {}).get("devices", [])) < 2:
        pytest.skip("needs two GPUs")
    out = tmp_path / "g1.jsonl"
    proc = xpubench("run", "-d", "gpu:1", "-b", backend, "-w", "matmul", "--size", "1024", "-p", "fp32",
                    "--no-progress", "-o", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = results(out)
    assert row["status"] == "ok" and row["placement"] == "gpu:1"


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "backend"), PATHS)
def test_every_workload_precision_and_mode_runs_on_the_device(kind, backend, tmp_path):
    needs(kind, backend)
    out = tmp_path / "all.jsonl"
    proc = xpubench("run", "-d", kind, "-b", backend, "--quick", "-w", "mnist_cnn,fashion_cnn,cifar10_resnet,"
                    "imdb_lstm,shakespeare_lstm,weather_gru", "--mode", "train,infer", "-p", PRECISIONS,
                    "--no-progress", "-o", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = results(out)
    device = rows[0]["case"]["device"]
    check_results(rows, device)
    trained = [r for r in rows if r["status"] == "ok" and r["case"]["mode"] == "train"]
    assert {r["case"]["precision"] for r in trained} >= {"fp32", "bf16", "fp16"}
    for r in trained:
        m = r["metrics"]
        assert m["matmul_precision"] and (m.get("autotune") or kind != "gpu"), r["case"]["key"]
        if r["case"]["precision"] == "fp16":
            assert m["final_loss_scale"] > 0
        if kind == "gpu" or (kind == "tpu" and backend == "jax"):
            assert m["peak_memory_bytes"] is None or m["peak_memory_bytes"] > 0
