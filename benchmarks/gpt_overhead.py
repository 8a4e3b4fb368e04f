"""How much does xpubench's harness cost on a transformer? Steady GPT training tokens/s, xpubench vs a
minimal hand-written loop in the same framework (the same model builder, AdamW, preset, batch and
synthetic tokens on the device).

Alternates A (xpubench: ``xpubench.run`` of one gpt training case, its own worker process, per-step
synchronised timing, the steady epochs' throughput: epoch_samples_per_s x context) and B (a minimal
loop in a fresh process: warm-up steps, then ``steps`` back-to-back steps, one sync, one clock) for
--rounds rounds, and prints the ratio of median tokens/s per framework. Target: >= 0.97.

    python benchmarks/gpt_overhead.py [--preset small] [--batch 16] [--steps 20] [--rounds 2]
                                      [--backends torch,jax]
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
from xpubench.workloads import gpt

COMMON = """
import time, numpy as np
from xpubench.workloads import gpt
from xpubench.data import synthetic
spec = gpt.configure({{"preset": "{preset}"}})
B, S, T = {batch}, {steps}, spec.block_size
ds = synthetic(spec, B * S, B, seed=0)
"""
TORCH = COMMON + """
import torch, torch.nn.functional as F
torch.manual_seed(0)
model = gpt.build_torch(spec)
opt = gpt.torch_optimizer(model.parameters(), spec, spec.learning_rate)
x, y = torch.from_numpy(ds.x_train), torch.from_numpy(ds.y_train).long()
def run(n):
    for i in range(n):
        j = i % S
        opt.zero_grad(set_to_none=True)
        logits = model(x[j * B:(j + 1) * B])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[j * B:(j + 1) * B].reshape(-1))
        loss.backward(); opt.step()
    return float(loss)
run(3)
t = time.perf_counter(); run(S); print(B * S * T / (time.perf_counter() - t))
"""
JAX = COMMON + """
import jax, jax.numpy as jnp, optax
model = gpt.build_jax(spec)
params = jax.jit(model.init)(jax.random.key(0), ds.x_train[:1])["params"]
tx = gpt.jax_optimizer(spec, spec.learning_rate); state = (params, tx.init(params))
xs = jnp.asarray(ds.x_train.reshape(S, B, T)); ys = jnp.asarray(ds.y_train.reshape(S, B, T))
def step(state, x, y):
    params, opt_state = state
    def lossf(p):
        with jax.default_matmul_precision("highest"):
            logits = model.apply({{"params": p}}, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
    loss, g = jax.value_and_grad(lossf)(params)
    u, opt_state = tx.update(g, opt_state, params)
    return (optax.apply_updates(params, u), opt_state), loss
step = jax.jit(step, donate_argnums=0)
def run(n, state):
    for i in range(n):
        state, loss = step(state, xs[i % S], ys[i % S])
    loss.block_until_ready(); return state
state = run(3, state)
t = time.perf_counter(); state = run(S, state); print(B * S * T / (time.perf_counter() - t))
"""


def hand_rate(backend: str, preset: str, batch: int, steps: int) -> float:
    code = (TORCH if backend == "torch" else JAX).format(preset=preset, batch=batch, steps=steps)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"hand loop failed:\n{out.stderr[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def xpubench_rate(backend: str, preset: str, batch: int, steps: int, env: dict, sync: str | None = None) -> float:
    """Steady-epoch tokens/s of one xpubench gpt training case (3 epochs of ``steps`` steps); ``sync``:
    xpubench's --sync (None: its default, a sync after every step on a CPU; "epoch": one per epoch, as the
    minimal loop does)."""
    with tempfile.TemporaryDirectory() as tmp:
        (r,) = xpubench.run(workloads=["gpt"], backends=[backend], devices=["cpu"], batch_sizes=[batch],
                            epochs=3, steps=steps, train_samples=batch * steps, eval_samples=batch,
                            options={"preset": preset, **({"sync": sync} if sync else {})}, processes=1,
                            output=Path(tmp) / "r.jsonl",
                            environment=env)
    if r.status != "ok":
        raise SystemExit(f"xpubench case failed: {r.status}: {r.message}")
    return r.metrics["epoch_samples_per_s"] * gpt.configure({"preset": preset}).block_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small", choices=list(gpt.PRESETS))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--backends", default="torch,jax")
    ap.add_argument("--sync", choices=["step", "epoch"], default=None,
                    help="xpubench's --sync (default: its own, per step on a CPU; the minimal loop syncs once)")
    args = ap.parse_args()
    env = detect_environment()
    rows = []
    for backend in args.backends.split(","):
        rows.append({"backend": backend, **alternate(
            args.rounds, partial(xpubench_rate, backend, args.preset, args.batch, args.steps, env, args.sync),
            partial(hand_rate, backend, args.preset, args.batch, args.steps))})
        ratio = rows[-1]["ratio"]
        print(f"{backend:5} gpt {args.preset} batch {args.batch}: xpubench {rows[-1]['xpubench']:9.0f} tokens/s   "
              f"minimal loop {rows[-1]['hand']:9.0f} tokens/s   ratio {ratio:.3f} "
              f"(rounds {min(rows[-1]['round_ratios']):.3f}-{max(rows[-1]['round_ratios']):.3f})  "
              f"{'ok' if ratio >= 0.97 else 'BELOW 0.97'}", flush=True)
    print(json.dumps({"min_ratio": min(r["ratio"] for r in rows), "rows": rows}))


if __name__ == "__main__":
    main()
