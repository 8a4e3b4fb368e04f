"""`srun -n 2 xpubench run ...` on the one-node Slurm (conftest's ``slurm`` fixture, tests/slurm_cluster.py):
two CPU processes (gloo), mnist_cnn data parallel in PyTorch and in JAX, started by Slurm with the line a
fleet machine with ``ntasks = 2`` runs (``launchers.srun_command``). Process 0 plans and writes; the file
holds the case once, its processes folded, with ``hosts`` (1: one node) and ``world_size`` (2) recorded."""

from __future__ import annotations

import os
import subprocess

import pytest
from quick_compile import QUICK_XLA
from test_distributed import xpubench_run

from xpubench.launch.launchers import srun_command
from xpubench.results.store import load_file

CASE = ["-w", "mnist_cnn", "--devices", "2", "--batch-size", "16", "--steps", "2", "--epochs", "2",
        "--train-samples", "64", "--eval-samples", "48", "--timeout", "300", "--no-progress"]


def _srun(slurm, tmp_path, backend: str, processes: int, extra_env: dict | None = None):
    out = tmp_path / f"{backend}.jsonl"
    line = srun_command([*xpubench_run(tmp_path), "-b", backend, *CASE, "--processes", str(processes),
                         "-o", str(out)], ntasks=2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("XPUBENCH_")}
    done = subprocess.run(line, check=False, capture_output=True, text=True, timeout=500, cwd=tmp_path,
                          env={**env, **(extra_env or {})})   # SLURM_CONF: the slurm fixture's
    assert done.returncode == 0, done.stderr[-3000:]
    assert "xpubench: process 1 of 2 (srun): process 0 at" in done.stderr
    assert sorted(p.name for p in tmp_path.glob("*.jsonl")) == [out.name]   # process 1 wrote nothing
    (result,) = load_file(out).results
    assert result.status == "ok", result.message
    m = result.metrics
    assert (m["hosts"], m["world_size"], m["devices"], m["global_batch"], m["launcher"]) == (1, 2, 2, 32, "srun")
    return result


@pytest.mark.slow
def test_srun_two_tasks_torch_ddp(slurm, tmp_path, one_thread_workers):
    pytest.importorskip("torch")
    result = _srun(slurm, tmp_path, "torch", processes=1)
    assert result.metrics["ddp_backend"] == "gloo"


@pytest.mark.slow
def test_srun_two_tasks_jax_distributed(slurm, tmp_path, one_thread_workers):
    pytest.importorskip("jax")
    result = _srun(slurm, tmp_path, "jax", processes=2, extra_env={"XLA_FLAGS": QUICK_XLA})
    assert result.metrics["processes"] == 2                     # two worker processes folded as one case
    assert result.placement.endswith("(2 devices)")
