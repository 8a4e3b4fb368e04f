"""xpubench's Llama generation in PyTorch vs Hugging Face transformers on the same weights.

For ``smollm-135m`` (random weights written once as a Hugging Face checkpoint and loaded by both) in
each dtype, alternating round by round in one process:

- A, xpubench: ``harness.generation.measure`` of the llama torch model in
  ``backends.torch_.generate.OwnCacheGenerator`` at batch 1:
  pp tokens/s = prompt / median prefill, tg tokens/s = decode steps / their total time.
- B, transformers ``LlamaForCausalLM`` (SDPA attention, same dtype): pp = prompt / median time of
  ``model(prompt, use_cache=True, logits_to_keep=1)`` (what ``generate`` runs as its prefill); tg from
  ``model.generate(greedy, cache on, exactly --new tokens)`` with a streamer stamping each token: the
  decode steps' total time (first new token to the last), as xpubench times them.

Prints the ratios A / B (target >= 0.9 for both) and the share of the bandwidth bound each tg reaches:
bytes per generated token (``llama.costs.decode_bytes_per_token`` at the mean decode context) over the
memory bandwidth measured here (``harness.bandwidth``, torch's STREAM kernels).

    python benchmarks/llm_vs_transformers.py [--dtypes fp32,bf16] [--prompt 512] [--new 128] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
from transformers import LlamaForCausalLM
from transformers.generation.streamers import BaseStreamer

from xpubench.backends.torch_.device import set_precision_mode
from xpubench.backends.torch_.generate import OwnCacheGenerator
from xpubench.harness.bandwidth import measure_bandwidth
from xpubench.harness.generation import measure
from xpubench.workloads.llama import checkpoint, costs
from xpubench.workloads.llama.config import preset
from xpubench.workloads.llama.torch_model import build

HF_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class Stamps(BaseStreamer):
    """Records the clock at every ``put`` (the prompt, then each generated token)."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def put(self, value) -> None:
        self.times.append(time.perf_counter())

    def end(self) -> None:
        pass


@torch.inference_mode()
def hf_round(model, prompt: torch.Tensor, new: int, repeats: int = 3) -> tuple[float, float]:
    """(pp tokens/s from the median of ``repeats`` prefills, tg tokens/s of one generate call)."""
    pre = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        model(prompt, use_cache=True, logits_to_keep=1)
        pre.append(time.perf_counter() - t0)
    stamps = Stamps()
    model.generate(prompt, max_new_tokens=new, min_new_tokens=new, do_sample=False, use_cache=True,
                   eos_token_id=None, pad_token_id=0, streamer=stamps)
    tokens = stamps.times[1:]              # [0] is the prompt; [1] the first token (after the prefill)
    assert len(tokens) == new, len(tokens)
    return prompt.shape[1] / statistics.median(pre), (new - 1) / (tokens[-1] - tokens[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget", type=float, default=8.0, help="xpubench's measurement budget per round, s")
    args = ap.parse_args()
    cfg = preset("smollm-135m")
    device = torch.device("cpu")
    from xpubench.backends.torch_.ceiling import stream_ops

    bw = measure_bandwidth(stream_ops("cpu"), backend="torch", device="cpu", budget_s=4).gb_per_s
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, measured bandwidth {bw:.1f} GB/s")
    prompt = np.random.default_rng(0).integers(0, cfg.vocab_size, (1, args.prompt), dtype=np.int32)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint.write_checkpoint(tmp, cfg, checkpoint.random_hf_tensors(cfg, seed=0))
        ckpt = checkpoint.open_checkpoint(tmp)
        for fmt in args.dtypes.split(","):
            set_precision_mode(fmt)   # as backends/torch_/generate.py: fp32 means TF32 off
            gen = OwnCacheGenerator(build(cfg, fmt, device, checkpoint=ckpt), prompt, args.new, device)
            hf = LlamaForCausalLM.from_pretrained(tmp, dtype=HF_DTYPES[fmt], attn_implementation="sdpa").eval()
            hf_prompt = torch.from_numpy(prompt.astype(np.int64))
            ours_pp, ours_tg, hf_pp, hf_tg = [], [], [], []
            for _ in range(args.rounds):
                m, _ = measure(gen, args.budget)
                ours_pp.append(m["prefill_tokens_per_s"])
                ours_tg.append(m["decode_tokens_per_s"])
                pp, tg = hf_round(hf, hf_prompt, args.new)
                hf_pp.append(pp)
                hf_tg.append(tg)
            per_token = costs.decode_bytes_per_token(cfg, fmt, 1, args.prompt + args.new / 2)
            bound = bw * 1e9 / per_token
            r = {"xpubench_pp": statistics.median(ours_pp), "hf_pp": statistics.median(hf_pp),
                 "xpubench_tg": statistics.median(ours_tg), "hf_tg": statistics.median(hf_tg),
                 "tg_bound": bound, "rounds": {"xpubench_pp": ours_pp, "hf_pp": hf_pp, "xpubench_tg": ours_tg,
                                               "hf_tg": hf_tg}}
            r["pp_ratio"] = r["xpubench_pp"] / r["hf_pp"]
            r["tg_ratio"] = r["xpubench_tg"] / r["hf_tg"]
            results[fmt] = r
            print(f"{fmt}: pp {r['xpubench_pp']:.0f} vs {r['hf_pp']:.0f} tok/s (ratio {r['pp_ratio']:.3f}); "
                  f"tg {r['xpubench_tg']:.1f} vs {r['hf_tg']:.1f} tok/s (ratio {r['tg_ratio']:.3f}); "
                  f"tg share of the bandwidth bound ({bound:.1f} tok/s): xpubench {r['xpubench_tg'] / bound:.0%}, "
                  f"transformers {r['hf_tg'] / bound:.0%}")
            del gen, hf
    print(json.dumps({"bandwidth_gb_per_s": bw, **results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
