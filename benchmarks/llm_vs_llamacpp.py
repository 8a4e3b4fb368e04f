"""xpubench's Llama generation in PyTorch and JAX vs llama.cpp's llama-bench, on the same weights.

One Hugging Face checkpoint of random weights (smollm-135m's shape unless ``--preset``/``--layers`` say
otherwise) is written once; every runtime loads it: torch and JAX through ``--weights`` (their backends'
generators, as ``xpubench run`` builds them), llama.cpp as the GGUF xpubench writes of it
(backends/llamacpp_/gguf_file.py; q8_0 and q4_0 by llama-quantize). Per format the three run alternately,
round after round, in this one process (llama-bench in its own):

- torch and JAX: ``harness.generation.measure`` (pp = prompt / median prefill, tg = decode steps / their
  total time), ``--budget`` seconds of rounds each time;
- llama.cpp: ``llama-bench -p P -n 0`` and ``-p 0 -n N-1 -d P`` with ``-r 5`` (backends/llamacpp_/bench.py:
  the same pp and the same decode contexts), its own timing.

Formats: fp32, bf16, int8 (llama.cpp: q8_0), int4 (llama.cpp: q4_0, and q4_K_M beside it); torch and JAX
run a format where their backend has it (int4: where this xpubench has int4 weights).
Prints each figure, the ratios xpubench / llama.cpp per format and the machine's load before and after
(``os.getloadavg``: on a shared machine the figures move with it), then one JSON line of everything.

    python benchmarks/llm_vs_llamacpp.py [--formats fp32,bf16,int8,int4] [--prompt 512] [--new 128]
        [--rounds 2] [--budget 6] [--preset smollm-135m] [--layers N] [--frameworks torch,jax]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile

from xpubench import backends
from xpubench.backends.llamacpp_ import gguf_file
from xpubench.backends.llamacpp_.case import llama_bench_for
from xpubench.backends.llamacpp_.gguf_file import GGUF_TYPES
from xpubench.case import Case
from xpubench.harness.generation import measure
from xpubench.workloads.llama import checkpoint
from xpubench.workloads.llama.config import preset


def one_round(backend: str, case: Case, budget: float, gguf_format: str | None = None) -> tuple[float, float]:
    """(pp tokens/s, tg tokens/s) of one measurement of ``case`` by ``backend`` (llama.cpp: of the GGUF in
    ``gguf_format`` when given, e.g. q4_K_M)."""
    record = backends.get(backend)
    reason = record.unsupported(case)
    if reason:
        raise SystemExit(f"{backend} {case.precision}: {reason}")
    gen = llama_bench_for(case, gguf_format) if gguf_format else record.generator(case)
    m, _ = measure(gen, budget)
    return m["prefill_tokens_per_s"], m["decode_tokens_per_s"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", default="fp32,bf16,int8,int4")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget", type=float, default=6.0, help="torch's and JAX's measurement per round, s")
    ap.add_argument("--preset", default="smollm-135m")
    ap.add_argument("--layers", type=int, help="fewer layers than the preset's (a shorter run)")
    ap.add_argument("--frameworks", default="torch,jax", help="xpubench's frameworks beside llama.cpp")
    args = ap.parse_args()
    cfg = preset(args.preset)
    if args.layers:
        cfg = dataclasses.replace(cfg, n_layers=args.layers, name=f"{cfg.name} ({args.layers} layers)")
    formats = args.formats.split(",")
    frameworks = {f: [b for b in args.frameworks.split(",") if f in backends.get(b).precisions] for f in formats}
    load_before = os.getloadavg()
    cache = gguf_file.cache_dir()
    had = set(cache.glob("*.gguf")) if cache.is_dir() else set()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint.write_checkpoint(tmp, cfg, checkpoint.random_hf_tensors(cfg, seed=0))
        options = {"weights": tmp, "prompt_len": args.prompt, "new_tokens": args.new}
        for fmt in formats:
            case = Case(workload="llama", backend="torch", device="cpu", mode="generate", precision=fmt,
                        batch_size=1, options=options)
            runtimes = [*frameworks[fmt], "llamacpp", *(["llamacpp q4_K_M"] if fmt == "int4" else [])]
            rounds = {r: [] for r in runtimes}
            for _ in range(args.rounds):
                for runtime in runtimes:
                    backend, _, gguf_format = runtime.partition(" ")
                    rounds[runtime].append(one_round(backend, dataclasses.replace(case, backend=backend),
                                                     args.budget, gguf_format or None))
            med = {r: (statistics.median(p for p, _ in v), statistics.median(t for _, t in v))
                   for r, v in rounds.items()}
            llama_pp, llama_tg = med["llamacpp"]
            results[fmt] = {"median_pp_tg": med, "rounds": rounds,
                            "ratio_vs_llamacpp": {r: {"pp": med[r][0] / llama_pp, "tg": med[r][1] / llama_tg}
                                                  for r in runtimes if r != "llamacpp"}}
            said = "; ".join(f"{r} pp {p:,.0f} tg {t:,.1f}" for r, (p, t) in med.items())
            ratios = ", ".join(f"{r} pp x{v['pp']:.2f} tg x{v['tg']:.2f}"
                               for r, v in results[fmt]["ratio_vs_llamacpp"].items())
            missing = "" if frameworks[fmt] else " (no torch or JAX backend here has this format)"
            print(f"{fmt}: {said} tok/s | vs llama.cpp {GGUF_TYPES[fmt][0].lower()}: {ratios or 'n/a'}{missing}",
                  flush=True)
    for written in set(cache.glob("*.gguf")) - had:   # the GGUFs of this run's temporary checkpoint
        written.unlink()
    load_after = os.getloadavg()
    print(f"load average (1, 5, 15 min) before {load_before}, after {load_after}; {os.cpu_count()} CPUs")
    print(json.dumps({"model": cfg.name, "prompt": args.prompt, "new": args.new, "load_before": load_before,
                      "load_after": load_after, **results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
