"""The decode variants of xpubench's Llama generation side by side in one process (issue 33): PyTorch's
eager step against its compiled one (static KV cache + ``torch.compile``), and JAX's jitted step with
the weights of a bf16, int8 or int4 model entering their dots in the compute dtype (bf16: what XLA:CPU
then converts to f32 in a separate buffer per call) against upcast to float32 beside the dot (what the
workload does on XLA:CPU: flax_model's docstring), per weight format, at a depth.

For the model shape (``--preset``, optionally fewer ``--layers``), batch 1, ``--prompt`` + ``--new``
tokens after ``--depth`` cached ones: each variant's generator is built once (its compile timed apart),
then ``--rounds`` times every variant runs ``harness.generation.measure`` in turn (short budgets,
alternating, so a noisy shared machine hits all alike). Prints per variant the median pp and tg
tokens/s over the rounds, tg's share of the bandwidth bound (``llama.costs.decode_bytes_per_token`` at
the mean decode context over the bandwidth measured here by torch's STREAM kernels), the compile
seconds, and the ratios compiled / eager (torch), fp32 / bf16 operands (JAX bf16, int8, int4) and
JAX's bf16 / fp32 decode (issue 33's target: >= 1).

    python benchmarks/llm_decode_variants.py [--formats fp32,bf16,int8,int4] [--prompt 512] [--new 128]
        [--depth 0] [--layers N] [--rounds 3] [--budget 4] [--frameworks torch,jax]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time

import numpy as np


def torch_variants(cfg, fmt: str, prompt, args) -> dict:
    import torch

    from xpubench.backends.torch_.device import set_precision_mode
    from xpubench.backends.torch_.generate import OwnCacheGenerator
    from xpubench.workloads.llama.torch_model import build

    set_precision_mode("fp32")
    model = build(cfg, fmt, torch.device("cpu"), seed=0)
    return {f"torch {fmt} {step}": OwnCacheGenerator(model, prompt, args.new, torch.device("cpu"), args.depth, step)
            for step in ("eager", "compiled")}


def jax_variants(cfg, fmt: str, prompt, args) -> dict:
    import jax

    from xpubench.backends.jax_.generate import OwnCacheJaxGenerator
    from xpubench.workloads.llama import flax_model as fm
    from xpubench.workloads.llama import flax_params as fp

    device = jax.devices("cpu")[0]
    dequants = {"": None} if fmt == "fp32" else {"bf16 operands": None, "fp32 operands": "fp32"}
    out = {}
    for label, dequant in dequants.items():
        module = fm.LlamaFlax(cfg, fmt, dequant=dequant)
        params = fp.init_random(module, 0)
        out[f"jax {fmt} {label}".strip()] = OwnCacheJaxGenerator(module, params, prompt, args.new, device,
                                                                  module.compute_precision, args.depth)
    return out


def main() -> None:
    from xpubench.backends.torch_.ceiling import stream_ops
    from xpubench.harness.bandwidth import measure_bandwidth
    from xpubench.harness.generation import measure
    from xpubench.workloads.llama import costs
    from xpubench.workloads.llama.config import preset

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="smollm-135m")
    ap.add_argument("--layers", type=int, default=None, help="fewer layers than the preset's (a quicker check)")
    ap.add_argument("--formats", default="fp32,bf16,int8,int4")
    ap.add_argument("--frameworks", default="torch,jax")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--depth", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=4.0, help="seconds each measure() runs per round")
    args = ap.parse_args()
    cfg = preset(args.preset)
    if args.layers:
        cfg = dataclasses.replace(cfg, n_layers=args.layers, name=f"{cfg.name} ({args.layers} layers)")
    bw = measure_bandwidth(stream_ops("cpu"), backend="torch", device="cpu", budget_s=4).gb_per_s
    print(f"{cfg.name}, batch 1, prompt {args.prompt} + {args.new} new at depth {args.depth}; measured bandwidth "
          f"{bw:.1f} GB/s (torch STREAM)", flush=True)
    prompt = np.random.default_rng(0).integers(0, cfg.vocab_size, (1, args.prompt), dtype=np.int32)
    gens, compile_s = {}, {}
    for fmt in args.formats.split(","):
        for fw in args.frameworks.split(","):
            made = (torch_variants if fw == "torch" else jax_variants)(cfg, fmt, prompt, args)
            for name, gen in made.items():
                start = time.perf_counter()
                compile_s[name] = gen.compile()
                gens[name] = gen
                print(f"  built {name}: compile {compile_s[name] or 0:.1f} s ({time.perf_counter() - start:.1f} s)",
                      flush=True)
    pp: dict[str, list[float]] = {n: [] for n in gens}
    tg: dict[str, list[float]] = {n: [] for n in gens}
    for r in range(args.rounds):
        for name, gen in gens.items():
            gen.compile = lambda: None          # compiled once above
            metrics, _ = measure(gen, args.budget)
            pp[name].append(metrics["prefill_tokens_per_s"])
            tg[name].append(metrics["decode_tokens_per_s"])
            print(f"    {name}: pp {pp[name][-1]:.1f}, tg {tg[name][-1]:.2f} tok/s", flush=True)
        print(f"  round {r + 1}/{args.rounds} done", flush=True)
    rows = {}
    for name in gens:
        fmt = name.split()[1]
        per_token = costs.decode_bytes_per_token(cfg, fmt, 1, args.depth + args.prompt + args.new / 2)
        rows[name] = {"pp": statistics.median(pp[name]), "tg": statistics.median(tg[name]),
                      "tg_share": statistics.median(tg[name]) / (bw * 1e9 / per_token), "compile_s": compile_s[name]}
        print(f"{name:34s} pp {rows[name]['pp']:8.1f}  tg {rows[name]['tg']:7.2f} tok/s "
              f"({rows[name]['tg_share']:.0%} of the bound)  compile {compile_s[name] or 0:.0f} s")
    for fmt in args.formats.split(","):
        pairs = [(f"torch {fmt} compiled", f"torch {fmt} eager", "torch compiled / eager"),
                 (f"jax {fmt} fp32 operands", f"jax {fmt} bf16 operands", "jax operands fp32 / bf16"),
                 (f"jax {fmt} fp32 operands", "jax fp32", f"jax {fmt} / fp32")]
        for new, old, what in pairs:
            if new in rows and old in rows:
                print(f"{fmt}: {what}: tg {rows[new]['tg'] / rows[old]['tg']:.2f}x, "
                      f"pp {rows[new]['pp'] / rows[old]['pp']:.2f}x")
    print(json.dumps({"bandwidth_gb_s": bw, "rows": rows}))


if __name__ == "__main__":
    main()
