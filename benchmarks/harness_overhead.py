"""How much does xpubench's harness cost? Steady mnist_cnn training throughput, xpubench vs a minimal
hand-written loop in the same framework (same model builder, optimizer, batch, data on the device).

Alternates A (xpubench: its own worker process, per-step synchronised timing) and B (a minimal loop in
a fresh process: warm-up, then `steps` back-to-back steps, one sync, one clock) for --rounds rounds and
prints the ratio of median samples/s per framework. xpubench's figure is its epoch throughput
(global batch x steps / median steady epoch time), which includes every per-step sync and clock read.
Target: >= 0.97.

    python benchmarks/harness_overhead.py [--batch 256] [--steps 30] [--rounds 3] [--backends torch,jax]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

from rounds import alternate  # benchmarks/rounds.py (scripts run from benchmarks/)

import xpubench
from xpubench.backends.fingerprint import detect_environment

COMMON = """
import time, numpy as np
from xpubench.workloads import get_workload
from xpubench.data import synthetic
wl = get_workload("mnist_cnn"); spec = wl.spec
B, S = {batch}, {steps}
ds = synthetic(spec, B * S, B, seed=0)
"""
TORCH = COMMON + """
import torch, torch.nn.functional as F
model = wl.models["torch"](spec).to(memory_format=torch.channels_last)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.from_numpy(ds.x_train), torch.from_numpy(ds.y_train).long()
def run(n):
    for i in range(n):
        j = i % S
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x[j * B:(j + 1) * B]), y[j * B:(j + 1) * B])
        loss.backward(); opt.step()
    return float(loss)
run(3)
t = time.perf_counter(); run(S); print(B * S / (time.perf_counter() - t))
"""
JAX = COMMON + """
import jax, jax.numpy as jnp, optax
model = wl.models["jax"](spec)
params = model.init({{"params": jax.random.key(0), "dropout": jax.random.key(1)}}, ds.x_train[:1], \
train=False)["params"]
tx = optax.adam(1e-3); state = (params, tx.init(params))
xs = jnp.asarray(ds.x_train.reshape(S, B, 28, 28, 1)); ys = jnp.asarray(ds.y_train.reshape(S, B))
def step(state, x, y, key):
    params, opt_state = state
    def lossf(p):
        logits = model.apply({{"params": p}}, x, train=True, rngs={{"dropout": key}})
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
    loss, g = jax.value_and_grad(lossf)(params)
    u, opt_state = tx.update(g, opt_state, params)
    return (optax.apply_updates(params, u), opt_state), loss
step = jax.jit(step, donate_argnums=0)   # the state donated, as xpubench's step does (backends/jax_/train.py)
key = jax.random.key(2)
def run(n, state):
    for i in range(n):
        state, loss = step(state, xs[i % S], ys[i % S], jax.random.fold_in(key, i))
    loss.block_until_ready(); return state
state = run(3, state)
t = time.perf_counter(); state = run(S, state); print(B * S / (time.perf_counter() - t))
"""


def hand_rate(backend: str, batch: int, steps: int) -> float:
    code = (TORCH if backend == "torch" else JAX).format(batch=batch, steps=steps)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"hand loop failed:\n{out.stderr[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def xpubench_rate(backend: str, batch: int, steps: int, env: dict) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        (r,) = xpubench.run(workloads=["mnist_cnn"], backends=[backend], devices=["cpu"], batch_sizes=[batch],
                            epochs=3, steps=steps, train_samples=batch * steps, eval_samples=batch,
                            output=Path(tmp) / "r.jsonl", environment=env)
    if r.status != "ok":
        raise SystemExit(f"xpubench case failed: {r.status}: {r.message}")
    return r.metrics["epoch_samples_per_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backends", default="torch,jax")
    args = ap.parse_args()
    env = detect_environment()
    rows = []
    for backend in args.backends.split(","):
        rows.append({"backend": backend,
                     **alternate(args.rounds, partial(xpubench_rate, backend, args.batch, args.steps, env),
                                 partial(hand_rate, backend, args.batch, args.steps))})
        ratio = rows[-1]["ratio"]
        print(f"{backend:5} batch {args.batch}: xpubench {rows[-1]['xpubench']:8.0f} samples/s   minimal loop "
              f"{rows[-1]['hand']:8.0f} samples/s   ratio {ratio:.3f} "
              f"(rounds {min(rows[-1]['round_ratios']):.3f}-{max(rows[-1]['round_ratios']):.3f})  "
              f"{'ok' if ratio >= 0.97 else 'BELOW 0.97'}",
              flush=True)
    print(json.dumps({"min_ratio": min(r["ratio"] for r in rows), "rows": rows}))


if __name__ == "__main__":
    main()
