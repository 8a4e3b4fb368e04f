"""What does per-step timing cost a training step? One trainer in this process, its steady epoch timed by the
harness's own StepTimer (harness/training.py) three ways, alternating round by round so that a machine's drift
hits all three:

  synced     every step waited for alone before the next is launched (step mode before issue 53, item 9)
  ahead      step mode on a CPU now: step k+1 is queued before the host waits for step k (a trainer that
             dispatches ahead: JAX; torch's CPU steps are synchronous, so for torch it is `synced`)
  pipelined  the epoch's steps back to back and one sync (epoch mode; what a hand-written loop does)

Prints each way's median epoch and its paired ratio to `pipelined` (the median over rounds of epoch time /
pipelined epoch time of the same round: 1.0 = no cost), then the ratio of the fastest epochs (on a shared
machine, the one other jobs disturb least). Target: `ahead` <= 1.03 (the overhead benchmarks' 0.97).

    python benchmarks/step_sync.py [--workload gpt] [--batch 16] [--steps 20] [--rounds 7] [--backends jax,torch]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from xpubench import backends
from xpubench.case import Case
from xpubench.harness.training import StepTimer, step_epoch
from xpubench.workloads import with_identity

WAYS = ("synced", "ahead", "pipelined")


def epoch_timer(trainer, steps: int, way: str) -> StepTimer:
    clock = time.perf_counter
    return StepTimer(trainer.sync, clock, steps=steps, epoch=1, pipelined=way == "pipelined", budget=None,
                     begin=clock(), check_in_steps=False,
                     ahead=way == "ahead" and getattr(trainer, "dispatches_ahead", False))


def measure(backend: str, workload: str, batch: int, steps: int, rounds: int) -> dict:
    options = {"preset": "small"} if workload == "gpt" else {}
    case = with_identity(Case(workload=workload, backend=backend, device="cpu", mode="train", batch_size=batch,
                              train_samples=batch * steps, eval_samples=batch, epochs=3, steps=steps,
                              options=options))
    trainer = backends.get(backend).trainer(case)
    trainer.compile()
    trainer.start_epoch(1)

    def epoch(way: str) -> float:
        timer = epoch_timer(trainer, steps, way)
        step_epoch(trainer, 1, steps, timer)
        return timer.record.time_s

    for way in WAYS:   # warm-up: allocator, caches, the first steps' compilation
        epoch(way)
    times = {way: [] for way in WAYS}
    for _ in range(rounds):
        for way in WAYS:
            times[way].append(epoch(way))
    base = times["pipelined"]
    return {way: {"median_s": statistics.median(t), "ratio": statistics.median(a / b for a, b in zip(t, base)),
                  "fastest_ratio": min(t) / min(base), "all_s": t} for way, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="gpt", choices=["gpt", "mnist_cnn"])
    ap.add_argument("--batch", type=int, default=None, help="default: 16 for gpt, 256 for mnist_cnn")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--backends", default="jax,torch")
    args = ap.parse_args()
    batch = args.batch or (16 if args.workload == "gpt" else 256)
    rows = []
    for backend in args.backends.split(","):
        row = measure(backend, args.workload, batch, args.steps, args.rounds)
        rows.append({"backend": backend, **row})
        print(f"{backend:5} {args.workload} batch {batch}: " + "   ".join(
            f"{way} {row[way]['median_s']:.3f} s (x{row[way]['ratio']:.3f}, fastest x{row[way]['fastest_ratio']:.3f})"
            for way in WAYS), flush=True)
    print(json.dumps({"workload": args.workload, "batch": batch, "steps": args.steps, "rows": rows}))


if __name__ == "__main__":
    main()
