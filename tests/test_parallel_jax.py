"""JAX data parallel over 8 simulated CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=8).

The device count is fixed when JAX starts, so the checks run in a fresh interpreter with the flag set. Both
compile at XLA's backend optimisation level 0 (tests/quick_compile.py: the same programs, 4-5x less CPU to compile)
with one CPU thread per kernel library: they check what the sharded step computes and what a run records, not
how fast it runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from quick_compile import QUICK_XLA

from xpubench.results.store import load_file

pytest.importorskip("jax")

ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
EIGHT = {"XLA_FLAGS": f"--xla_force_host_platform_device_count=8 {QUICK_XLA}", **ONE_THREAD}

CHECKS = r"""
import dataclasses, json
import jax, numpy as np
from xpubench.case import Case
from xpubench.backends.jax_.parallel import ShardedJaxTrainer, ShardedPredictor
from xpubench.harness.inference import predict_all
from xpubench.backends.jax_.train import JaxTrainer

assert jax.device_count() == 8, jax.devices()
case = Case(workload="mnist_cnn", backend="jax", device="cpu", mode="train", batch_size=16, devices=8,
            epochs=1, steps=1, train_samples=256, eval_samples=1001)
par = ShardedJaxTrainer(case)                                            # 8 devices x 16
one = JaxTrainer(dataclasses.replace(case, devices=1, batch_size=128))   # 1 device x 128
leaves = lambda tree: [np.array(a, np.float64) for a in jax.tree.leaves(tree)]   # host copies
initial = leaves(one.state[0])        # the parameters before the step (which donates the state)
out = {"global_batch": [par.global_batch, one.global_batch], "loss": []}
for t in (par, one):
    t.compile()
    t.start_epoch(0)
    out["loss"].append(float(t.step(0)))          # dropout on: the same masks on both
(p8, s8, _), (p1, s1, _) = jax.device_get(par.state), jax.device_get(one.state)
out["param_max_diff"] = max(float(np.abs(a - b).max()) for a, b in zip(leaves(p8), leaves(p1)))
out["param_changed"] = max(float(np.abs(a - b).max()) for a, b in zip(leaves(p1), initial))
# Adam's first moment after one step is 0.1 x the gradient: the averaged gradient, compared directly
mu8, mu1 = leaves(s8[0].mu), leaves(s1[0].mu)
out["grad_rel_diff"] = max(float(np.abs(a - b).max() / np.abs(b).max()) for a, b in zip(mu8, mu1))
out["placement"] = par.placement()

params, _, extra = jax.device_get(par.state)
fn = lambda p, e, x: par.apply(p, e, x, False, None)[0]
x = par.x_eval
sharded = predict_all(ShardedPredictor(fn, params, extra, x, 16, par.mesh))   # 1001 -> 8 x 128 rows
single = np.asarray(jax.jit(fn)(params, extra, x))
out["predictions"] = [len(x), len(sharded)]
out["pred_max_diff"] = float(np.abs(sharded - single).max())
out["argmax_equal"] = bool((sharded.argmax(-1) == single.argmax(-1)).all())
print("RESULT " + json.dumps(out))
"""


def _run_script(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, **EIGHT})
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.mark.slow
def test_eight_device_step_equals_one_device_step_and_sharded_prediction_keeps_every_sample():
    out = _run_script(CHECKS)
    assert out["global_batch"] == [128, 128]
    assert out["loss"][0] == pytest.approx(out["loss"][1], rel=1e-5)
    assert out["param_changed"] > 1e-4                      # the step did move the parameters
    # gradients averaged over 8 devices == the gradient of the global batch on one device
    assert out["grad_rel_diff"] < 1e-4
    # Adam's first update is ~lr * sign(g): only coordinates with |g| ~ eps (1e-8) may differ, by < lr
    assert out["param_max_diff"] < 1e-4
    assert out["placement"] == "cpu:0..7 (8 devices)"
    assert out["predictions"] == [1001, 1001]
    assert out["pred_max_diff"] < 1e-5 and out["argmax_equal"]


@pytest.mark.slow
def test_cli_runs_mnist_over_eight_simulated_devices_train_and_infer(tmp_path):
    out = tmp_path / "dp.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "xpubench", "run", "--processes", "1", "-w", "mnist_cnn", "-b", "jax", "--devices", "8",
         "--mode", "train,infer", "--batch-size", "16", "--steps", "2", "--epochs", "2",
         "--train-samples", "256", "--eval-samples", "1001", "--time-budget", "1", "-o", str(out), "--no-progress",
         "--verbose"],
        capture_output=True, text=True, timeout=400, check=False, env={**os.environ, **EIGHT, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = {r.case.mode: r for r in load_file(out).results}
    for mode, r in results.items():
        assert r.status == "ok", (mode, r.message)
        m = r.metrics
        assert (m["devices"], m["per_device_batch"], m["global_batch"]) == (8, 16, 128), mode
        assert r.placement == "cpu:0..7 (8 devices)"
    assert results["train"].metrics["samples_per_s"] > 0 and results["train"].metrics["epochs_run"] == 2
    infer = results["infer"].metrics
    assert infer["predictions"] == 1001 and infer["pad_rows"] == 1024 - 1001 and 0 <= infer["accuracy"] <= 1
    assert "Data-parallel scaling" in proc.stdout
