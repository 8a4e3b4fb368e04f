"""Is the searched compute ceiling at least the best fixed-size matmul xpubench reports on this machine?

For each backend, alternately (A, B, A, B, ... for --rounds rounds) in one run:
  A: `xpubench.run(workloads=["matmul"], ...)` at the default sizes (fp32, each case in its own worker,
     xpubench's usual calibrated windows): that backend's best warm GFLOP/s;
  B: the ceiling search (`python -m xpubench.ceilings`, its own child process, --budget seconds).
Each side keeps its best round (both are "the fastest seen"). It prints each backend's ceiling / its
own best fixed size, then the headline: the best ceiling over numpy / torch / jax divided by the best
fixed-size figure over the three. Target: >= 1.0. With --bandwidth it also prints each backend's copy
and triad GB/s (from the last round).

    python benchmarks/ceiling_search.py [--budget 30] [--rounds 1] [--sizes 1024,2048,4096]
                                        [--backends numpy,torch,jax] [--bandwidth]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import xpubench
from xpubench.backends.fingerprint import detect_environment
from xpubench.ceilings.measure import default_sizes, measure_in_subprocess


def best_fixed(backend: str, sizes: list[int], env: dict) -> tuple[float, int]:
    """(best warm FLOP/s over the sizes, its N) as xpubench's matmul cases measure them."""
    with tempfile.TemporaryDirectory() as tmp:
        results = xpubench.run(workloads=["matmul"], backends=[backend], devices=["cpu"], precisions=["fp32"],
                               sizes=sizes, output=Path(tmp) / "r.jsonl", environment=env)
    ok = [r for r in results if r.status == "ok"]
    if not ok:
        raise SystemExit(f"no {backend} matmul case succeeded: {[(r.status, r.message) for r in results]}")
    best = max(ok, key=lambda r: r.metrics["warm_flops_per_s"])
    return best.metrics.warm_flops_per_s, best.case.size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=30.0, help="search seconds per backend (fp32)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--sizes", default=",".join(str(n) for n in default_sizes(False)))
    ap.add_argument("--backends", default="numpy,torch,jax")
    ap.add_argument("--bandwidth", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    env = detect_environment()
    rows = []
    for backend in args.backends.split(","):
        fixed, n, ceiling, bw = 0.0, None, None, None
        for _ in range(args.rounds):
            rate, size = best_fixed(backend, sizes, env)
            fixed, n = max((fixed, n), (rate, size), key=lambda x: x[0])
            (found,), bw = measure_in_subprocess(backend, "cpu", ["fp32"], budget_s=args.budget,
                                                 with_bandwidth=args.bandwidth)
            if ceiling is None or (found.flops_per_s or 0) > (ceiling.flops_per_s or 0):
                ceiling = found
        row = {"backend": backend, "fixed_gflops": fixed / 1e9, "fixed_n": n,
               "ceiling_gflops": (ceiling.flops_per_s or 0) / 1e9, "ceiling_shape": ceiling.shape,
               "ceiling_cv": ceiling.cv, "shapes_tried": sum(bool(s["samples_s"]) for s in ceiling.shapes),
               "ratio": (ceiling.flops_per_s or 0) / fixed}
        if bw:
            row.update({f"{k}_gb_per_s": v.gb_per_s for k, v in bw.kernels.items()}, array_mib=bw.array_bytes / 2**20)
        rows.append(row)
        shape = "x".join(map(str, ceiling.shape)) if ceiling.shape else "none"
        print(f"{backend:6} best fixed {fixed / 1e9:7.1f} GFLOP/s (N={n})   ceiling {row['ceiling_gflops']:7.1f} "
              f"GFLOP/s at {shape} (CV {ceiling.cv or 0:.1%}, {row['shapes_tried']} shapes)   ratio "
              f"{row['ratio']:.3f}" + (f"   copy {row['copy_gb_per_s']:.1f} triad {row['triad_gb_per_s']:.1f} GB/s"
                                         if bw else ""), flush=True)
    top_ceiling = max(rows, key=lambda r: r["ceiling_gflops"])
    top_fixed = max(rows, key=lambda r: r["fixed_gflops"])
    ratio = top_ceiling["ceiling_gflops"] / top_fixed["fixed_gflops"]
    print(f"searched ceiling {top_ceiling['ceiling_gflops']:.1f} GFLOP/s ({top_ceiling['backend']}) / best fixed size "
          f"{top_fixed['fixed_gflops']:.1f} GFLOP/s ({top_fixed['backend']}, N={top_fixed['fixed_n']}): ratio "
          f"{ratio:.3f}  {'ok' if ratio >= 1.0 else 'BELOW 1.0'}")
    print(json.dumps({"ratio": ratio, "rows": rows}, default=list))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
