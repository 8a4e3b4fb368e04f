"""Does xpubench's warm matmul figure match a direct hand-timed loop of the same library?

For each backend and size, alternately (A, B, A, B, ...) runs:
  A: `xpubench.run(workloads=["matmul"], ...)`: its own isolated worker, calibrated windows;
  B: a hand-written loop in a fresh process: warm up, then `reps` products, sync, clock; median of 7.
and prints the ratio of median GFLOP/s (xpubench / hand). Target: >= 0.95 for every backend.

    python benchmarks/matmul_fidelity.py [--sizes 1024,2048] [--rounds 3] [--backends numpy,torch,jax]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import xpubench
from xpubench.backends.fingerprint import detect_environment

HAND_LOOP = {
    "numpy": """
import numpy as np, time
a = np.random.default_rng(0).standard_normal((N, N), dtype=np.float32); b = a.copy()
f = lambda: a @ b; sync = lambda o: None
""",
    "torch": """
import torch, time
a = torch.randn(N, N); b = torch.randn(N, N)
f = lambda: a @ b; sync = lambda o: None
""",
    "jax": """
import jax, jax.numpy as jnp, time
a = jax.random.normal(jax.random.key(0), (N, N)); b = a + 1
g = jax.jit(lambda a, b: jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST))
f = lambda: g(a, b); sync = lambda o: o.block_until_ready()
""",
}
TIMING = """
for _ in range(3): sync(f())
reps = max(1, int(0.05 / (2 * N**3 / 150e9)))
rates = []
for _ in range(7):
    t = time.perf_counter()
    for _ in range(reps): o = f()
    sync(o)
    rates.append(2 * N**3 * reps / (time.perf_counter() - t))
rates.sort(); print(rates[3])
"""


def hand_rate(backend: str, n: int) -> float:
    code = HAND_LOOP[backend].replace("N, N", f"{n}, {n}") + TIMING.replace("N**3", f"{n}**3")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def xpubench_rate(backend: str, n: int, env: dict) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        (result,) = xpubench.run(workloads=["matmul"], backends=[backend], devices=["cpu"], precisions=["fp32"],
                                 sizes=[n], output=Path(tmp) / "r.jsonl", environment=env)
    if result.status != "ok":
        raise SystemExit(f"xpubench case failed: {result.status}: {result.message}")
    return result.metrics["warm_flops_per_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1024,2048")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backends", default="numpy,torch,jax")
    args = ap.parse_args()
    env = detect_environment()
    rows = []
    for backend in args.backends.split(","):
        for n in (int(s) for s in args.sizes.split(",")):
            ours, hand = [], []
            for _ in range(args.rounds):
                ours.append(xpubench_rate(backend, n, env))
                hand.append(hand_rate(backend, n))
            ratio = statistics.median(ours) / statistics.median(hand)
            rows.append({"backend": backend, "n": n, "xpubench_gflops": statistics.median(ours) / 1e9,
                         "hand_gflops": statistics.median(hand) / 1e9, "ratio": ratio})
            print(f"{backend:6} N={n:5}  xpubench {rows[-1]['xpubench_gflops']:7.1f} GFLOP/s   "
                  f"hand loop {rows[-1]['hand_gflops']:7.1f} GFLOP/s   ratio {ratio:.3f}  "
                  f"{'ok' if ratio >= 0.95 else 'BELOW 0.95'}", flush=True)
    print(json.dumps({"min_ratio": min(r["ratio"] for r in rows), "rows": rows}))


if __name__ == "__main__":
    main()
