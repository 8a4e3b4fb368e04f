"""Every LLM runtime here side by side on the same weights: xpubench's Llama generation in PyTorch and JAX,
and the engines llama.cpp (llama-bench), OpenVINO GenAI and MLX-LM, with the OpenVINO overhead ratio.

One Hugging Face checkpoint of random weights (smollm-135m's shape unless ``--preset``/``--layers`` say
otherwise) is written once (the llama workload's ``checkpoint`` hook) and every runtime loads it: torch and
JAX through ``--weights`` (their backends' generators, as ``xpubench run`` builds them), each engine through
its ``load`` (llama.cpp the GGUF xpubench writes of it, q8_0 and q4_0 by llama-quantize; OpenVINO the IR
converted from it; MLX-LM the folder itself). Per format the runtimes run alternately, round after round,
in this one process (llama-bench in its own):

- torch and JAX: ``harness.generation.measure`` (pp = prompt / median prefill, tg = 1 / the median round's
  mean decode step), ``--budget`` seconds of rounds each time;
- each engine: its ``bench`` with the same budget (llama.cpp: ``llama-bench -p P -n 0`` and ``-p 0 -n N-1
  -d P``, its own timing; OpenVINO GenAI and MLX-LM: their generate calls timed at each streamed token).

Formats: fp32, bf16, int8, int4 (llama.cpp: q8_0, q4_0, and q4_K_M beside int4); a runtime runs a format
where it has it. Prints each figure, the ratios to llama.cpp per format, and **the OpenVINO overhead
ratio**: OpenVINO's tg through xpubench (its clock at each streamed token) over the pipeline's own perf
metrics (1 / TPOT) on the same calls, the median over rounds (the target: 0.95-1.05), then the machine's
load before and after (``os.getloadavg``) and one JSON line of everything. What it writes (the checkpoint,
GGUFs, OpenVINO models) lies in a temporary cache, removed at the end.

    python benchmarks/llm_runtimes.py [--formats fp32,bf16,int8,int4] [--prompt 512] [--new 128]
        [--rounds 2] [--budget 6] [--preset smollm-135m] [--layers N] [--frameworks torch,jax]
        [--engines llamacpp,openvino,mlx]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

from xpubench import backends
from xpubench.case import Case
from xpubench.envnames import LLAMACPP_DIR
from xpubench.harness.generation import measure
from xpubench.workloads import get_workload


def framework_round(backend: str, case: Case, budget: float) -> dict:
    record = backends.get(backend)
    reason = record.unsupported(case)
    if reason:
        raise SystemExit(f"{backend} {case.precision}: {reason}")
    return measure(record.generator(case), budget)[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", default="fp32,bf16,int8,int4")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget", type=float, default=6.0, help="each runtime's measurement per round, s")
    ap.add_argument("--preset", default="smollm-135m")
    ap.add_argument("--layers", type=int, help="fewer layers than the preset's (a shorter run)")
    ap.add_argument("--frameworks", default="torch,jax", help="xpubench's frameworks")
    ap.add_argument("--engines", default="llamacpp,openvino,mlx", help="the engines (those installed here)")
    args = ap.parse_args()
    from xpubench.backends.llamacpp_.binaries import find

    programs = find()
    if programs.bench is not None:   # found before the cache moves to the temporary folder
        os.environ[LLAMACPP_DIR] = str(programs.bench.parent)
    llama = get_workload("llama")
    shape = {"preset": args.preset, **({"n_layers": args.layers} if args.layers else {})}
    formats = args.formats.split(",")
    load_before = os.getloadavg()
    results = {}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["XDG_CACHE_HOME"] = cache
        weights = llama.checkpoint(llama.spec_for(llama.options_of(shape)), 0)
        options = llama.options_of(llama.pin_options({"weights": str(weights.folder), "prompt_len": args.prompt,
                                                      "new_tokens": args.new}))
        spec = llama.spec_for(options)
        for fmt in formats:
            case = Case(workload="llama", backend="torch", device="cpu", mode="generate", precision=fmt,
                        batch_size=1, options=options, key_options=llama.key_options)
            runtimes = [b for b in args.frameworks.split(",") if b and fmt in backends.get(b).precisions]
            models = {}
            for name in filter(None, args.engines.split(",")):
                engine = backends.get(name)
                why = engine.unsupported(Case(**{**case.__dict__, "backend": name})) or engine.cannot_load(
                    llama.checkpoint(spec, 0, write=False), fmt)
                if why:
                    print(f"{fmt}: {name} left out: {why}", flush=True)
                    continue
                models[name] = (engine, engine.load(llama.checkpoint(spec, 0), fmt))
                if name == "llamacpp" and fmt == "int4":
                    from xpubench.backends.llamacpp_.case import gguf_model

                    models["llamacpp q4_K_M"] = (engine, gguf_model(llama.checkpoint(spec, 0), "q4_K_M"))
            runtimes += list(models)
            rounds = {r: [] for r in runtimes}
            for _ in range(args.rounds):
                for runtime in runtimes:
                    if runtime in models:
                        engine, model = models[runtime]
                        m = engine.bench(model, prompt_len=args.prompt, new_tokens=args.new, depth=0, batch=1,
                                         budget_s=args.budget)[0]
                    else:
                        m = framework_round(runtime, Case(**{**case.__dict__, "backend": runtime}), args.budget)
                    rounds[runtime].append((m["prefill_tokens_per_s"], m["decode_tokens_per_s"],
                                            m.get("engine_decode_tokens_per_s")))
            med = {r: (statistics.median(p for p, _, _ in v), statistics.median(t for _, t, _ in v))
                   for r, v in rounds.items()}
            results[fmt] = {"median_pp_tg": med, "rounds": rounds}
            said = "; ".join(f"{r} pp {p:,.0f} tg {t:,.1f}" for r, (p, t) in med.items())
            print(f"{fmt}: {said} tok/s", flush=True)
            if "llamacpp" in med:
                base_pp, base_tg = med["llamacpp"]
                ratios = {r: {"pp": p / base_pp, "tg": t / base_tg} for r, (p, t) in med.items() if r != "llamacpp"}
                results[fmt]["ratio_vs_llamacpp"] = ratios
                said = ", ".join(f"{r} pp x{v['pp']:.2f} tg x{v['tg']:.2f}" for r, v in ratios.items())
                print(f"  vs llama.cpp: {said}")
            if "openvino" in rounds:
                overhead = statistics.median(t / own for _, t, own in rounds["openvino"])
                results[fmt]["openvino_overhead_ratio"] = overhead
                print(f"  OpenVINO overhead ratio (tg through xpubench / the pipeline's own perf metrics): "
                      f"{overhead:.3f} (target 0.95-1.05; per round: "
                      f"{', '.join(f'{t / own:.3f}' for _, t, own in rounds['openvino'])})", flush=True)
    load_after = os.getloadavg()
    print(f"load average (1, 5, 15 min) before {load_before}, after {load_after}; {os.cpu_count()} CPUs")
    model = args.preset + (f" ({args.layers} layers)" if args.layers else "")
    print(json.dumps({"model": model, "prompt": args.prompt, "new": args.new, "load_before": load_before,
                      "load_after": load_after, **results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
