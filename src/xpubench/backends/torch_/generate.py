"""PyTorch greedy generation with a preallocated KV cache (the measurement is ``harness/generation.py``).

The cache is two tensors (L, B, H, T_max, Q), keys and values, allocated once in the model's dtype for
``prompt_len + new_tokens - 1`` positions (the last token generated is never fed back) and reused by
every round: a prefill overwrites positions 0..P-1, each decode step writes one more and attends to the
positions written so far (a view, ``[:pos+1]``), so stale entries beyond are never read. With a depth
D (llama-bench's -d) the cache holds D more positions, written once before the rounds (``fill``), and
every round starts at position D. Eager, under ``torch.inference_mode``; the model is the GPT of
``xpubench.workloads.gpt`` (``forward(idx, kv, pos, last_only)``, built from ``spec``), already on the
device in the precision to measure. A workload's own model (``OwnCacheGenerator``, llama) may also
run its decode step compiled (``--decode compiled``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from xpubench import backends
from xpubench.backends.torch_.attention import checked_kernel
from xpubench.backends.torch_.device import sync
from xpubench.harness.generation import cache_positions
from xpubench.workloads.llama.torch_weights import ROW_BLOCKS


@dataclass
class KVCache:
    k: torch.Tensor     # (L, B, H, T_max, Q), or a list of L (B, H, T_max, Q) (OwnCacheGenerator's models)
    v: torch.Tensor
    pos: int = 0        # positions 0..pos-1 hold keys and values of the current sequences


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """(B, 1, V) logits of the last position -> (B,) token ids (argmax; ties to the lowest id)."""
    return logits[:, -1].argmax(-1)


class TorchGenerator:
    """prefill / decode / sync over a GPT module; see ``harness.generation.Generator``."""

    def __init__(self, model: torch.nn.Module, spec, prompt: np.ndarray, new_tokens: int, device: torch.device,
                 depth: int = 0):
        self.model, self.device, self.attention = model.eval(), device, getattr(spec, "attention", "auto")
        self.batch, self.prompt_len = prompt.shape
        self.new_tokens, self.depth = new_tokens, depth
        positions = cache_positions(self.context(spec), depth + self.prompt_len, new_tokens)
        self.prompt = torch.from_numpy(np.ascontiguousarray(prompt)).to(device)
        self.cache = KVCache(*self.new_cache(spec, positions))
        if depth:
            self.fill(depth)
        sync(device)

    @torch.inference_mode()
    def fill(self, depth: int) -> None:
        """Untimed, once: the cache's first ``depth`` positions written by a prefill of the prompt's tokens
        repeated (each round then writes and reads only the positions after them: llama-bench's -d)."""
        tokens = self.prompt.repeat(1, -(-depth // self.prompt_len))[:, :depth]
        self.model(tokens, (self.cache.k, self.cache.v), 0, last_only=True)

    @staticmethod
    def context(spec) -> int:
        """Positions the model can attend to (a subclass for another model overrides it)."""
        return spec.block_size

    def new_cache(self, spec, positions: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Zeroed keys and values (L, B, H, positions, Q) in the model's dtype, on the device."""
        shape = (spec.n_layer, self.batch, spec.n_head, positions, spec.n_embd // spec.n_head)
        dtype = next(self.model.parameters()).dtype
        return (torch.zeros(shape, dtype=dtype, device=self.device),
                torch.zeros(shape, dtype=dtype, device=self.device))

    def compile(self) -> None:
        return None   # eager

    @torch.inference_mode()
    def prefill(self, prompt: torch.Tensor) -> tuple[KVCache, torch.Tensor]:
        cache = self.cache
        logits = self.model(prompt, (cache.k, cache.v), self.depth, last_only=True)
        cache.pos = self.depth + prompt.shape[1]
        return cache, greedy(logits)

    @torch.inference_mode()
    def decode(self, cache: KVCache, token: torch.Tensor) -> tuple[KVCache, torch.Tensor]:
        logits = self.model(token[:, None], (cache.k, cache.v), cache.pos, last_only=True)
        cache.pos += 1
        return cache, greedy(logits)

    def sync(self, token: torch.Tensor) -> None:
        sync(self.device)

    def host(self, token: torch.Tensor) -> np.ndarray:
        return token.cpu().numpy()

    def info(self) -> dict:
        """The SDPA kernels a prefill and a decode step run (one untimed prefill and decode step under
        the profiler); a kernel other than the one the spec asks for is a RuntimeError."""
        found = {}

        def prefill():
            found["cache"], found["token"] = self.prefill(self.prompt)

        kernels = {"attention_kernel_prefill": checked_kernel(self.attention, prefill)}
        kernels["attention_kernel_decode"] = checked_kernel(
            self.attention, lambda: self.decode(found["cache"], found["token"]))
        return kernels


@torch.inference_mode()
def generate_uncached(model: torch.nn.Module, prompt: np.ndarray, new_tokens: int) -> np.ndarray:
    """The reference: greedy decoding that runs the whole sequence so far through the model for every
    token (no cache). Returns (B, new_tokens) ids, as ``harness.generation.generate`` does."""
    device = next(model.parameters()).device
    seq = torch.from_numpy(np.ascontiguousarray(prompt)).to(device)
    out = []
    for _ in range(new_tokens):
        token = greedy(model.eval()(seq)[:, -1:])
        out.append(token)
        seq = torch.cat([seq, token[:, None]], dim=1)
    return torch.stack(out, dim=1).cpu().numpy()


def tensor_bytes(tensors) -> int:
    """Bytes the tensors hold (each counted once; a list or tuple among them: its tensors)."""
    flat = [t for x in tensors for t in (x if isinstance(x, (list, tuple)) else (x,))]
    return sum(t.numel() * t.element_size() for t in dict.fromkeys(flat))


class OwnCacheGenerator(TorchGenerator):
    """A TorchGenerator over a model that declares its generation layout itself (a workload's
    ``generation_models["torch"]``, e.g. workloads/llama): ``model.context`` (the positions it can attend
    to), ``model.new_cache(batch, positions)`` -> zeroed (keys, values) on its device (each a tensor
    or a list of per-layer tensors: the model indexes them), and
    ``model.generation_facts()`` -> untimed facts to record (its weights' bytes and format). The model
    is called as gpt's: ``model(idx, (keys, values), pos, last_only=True)``.

    ``decode="compiled"`` (what gpt-fast and transformers' static cache do): every decode step calls
    ``model.decode_static(token, keys, values, pos)`` (fixed shapes, the position a tensor) compiled by
    ``torch.compile`` (``compile_mode``: "reduce-overhead", i.e. CUDA graphs, on NVIDIA/AMD GPUs, else
    Inductor's default); its compilation is timed apart (``compile``: the first two calls, at a position
    every round writes again before reading it). ``"eager"``: the model's eager step. The prefill is
    eager in both (a few large matmuls: compute-bound, no launch overhead to save)."""

    def __init__(self, model: torch.nn.Module, prompt: np.ndarray, new_tokens: int, device: torch.device,
                 depth: int = 0, decode: str = "eager"):
        super().__init__(model, None, prompt, new_tokens, device, depth)
        self.decode_variant, self._step = decode, None

    def context(self, spec) -> int:
        return self.model.context

    def new_cache(self, spec, positions: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.new_cache(self.batch, positions)

    def compile_mode(self) -> str:
        return "reduce-overhead" if self.device.type == "cuda" else "default"

    def compile(self) -> float | None:
        """The compiled decode step built and run twice (its compilation, and CUDA graphs' recording);
        seconds, or None for the eager step."""
        if self.decode_variant != "compiled":
            return None
        start = time.perf_counter()
        self._step = torch.compile(self.model.decode_static, mode=self.compile_mode(), fullgraph=True, dynamic=False)
        token = torch.zeros(self.batch, dtype=torch.long, device=self.device)
        for _ in range(2):
            self.decode(KVCache(self.cache.k, self.cache.v, self.depth + self.prompt_len), token)
        sync(self.device)
        return time.perf_counter() - start

    @torch.inference_mode()
    def decode(self, cache: KVCache, token: torch.Tensor) -> tuple[KVCache, torch.Tensor]:
        if self._step is None:
            return super().decode(cache, token)
        pos = torch.tensor(cache.pos, device=self.device)
        token = self._step(token, cache.k, cache.v, pos).clone()   # clone: CUDA graphs reuse their output
        cache.pos += 1
        return cache, token

    def info(self) -> dict:
        """The SDPA kernels (``TorchGenerator.info``), the KV cache's bytes as allocated, the decode step
        and the model's facts."""
        facts = self.model.generation_facts()
        fused = (f", one-row projections as fused multiply-sums of inputs computed once, {ROW_BLOCKS} blocks of rows "
                 "side by side" if self.device.type == "cpu" and facts.get("weight_format") != "int4" else "")
        step = ("eager" if self._step is None
                else f"compiled (torch.compile, mode={self.compile_mode()}, static KV cache{fused})")
        threads = torch.get_num_threads() if self.device.type == "cpu" else None
        return {**super().info(), "kv_cache_bytes": tensor_bytes((self.cache.k, self.cache.v)), "decode_step": step,
                "threads": threads, **facts}


INT8_METHOD = "torch.ao.quantization.quantize_dynamic: nn.Linear int8 weights, dynamic int8 activations"


def int8_model(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """Dynamic int8 of every nn.Linear (the tied output layer, a matmul with the embedding, and the
    attention products stay fp32). PyTorch's int8 kernels run on the CPU only."""
    from xpubench.backends.base import Unsupported

    if device.type != "cpu":
        raise Unsupported(f"int8 generation: PyTorch's int8 kernels (fbgemm/x86) run on the CPU only, not on {device}")
    from torch.ao.quantization import quantize_dynamic

    return quantize_dynamic(model.eval(), {torch.nn.Linear}, dtype=torch.qint8)


def generator_for(case) -> TorchGenerator:
    """The case's generator and a seeded random prompt batch. A workload with a generation model of its
    own (``generation_models["torch"]``: llama's weight formats, checkpoint weights) builds it, in an
    ``OwnCacheGenerator``; else a freshly initialised model of the case's spec (greedy decoding's speed
    does not depend on the weights' values), in the case's precision (fp32 with TF32 off, tf32, bf16 and
    fp16 as weights in that dtype, int8 dynamic on the CPU)."""
    from xpubench.backends.torch_.device import DTYPES, set_precision_mode, torch_device
    from xpubench.harness.generation import prompt_tokens
    from xpubench.workloads import get_workload

    workload = get_workload(case.workload)
    spec = workload.spec_for(case.options)
    prompt_len, new_tokens = workload.generation_lengths(spec, case.options)
    device = torch_device(case.device)
    set_precision_mode(case.precision)
    torch.manual_seed(case.seed)
    own = workload.generation_models.get("torch")
    if own is not None:
        prompt = prompt_tokens(spec.vocab_size, case.batch_size, prompt_len, case.seed)
        return OwnCacheGenerator(own(spec, case.precision, device, case.seed), prompt, new_tokens, device,
                                 spec.depth, spec.decode)   # the workload's resolved spec (llama's)
    model = backends.get("torch").build(workload, spec)
    if case.precision == "int8":
        model = int8_model(model, device)
    else:
        model = model.to(device=device, dtype=DTYPES[case.precision])
    prompt = prompt_tokens(spec.vocab_size, case.batch_size, prompt_len, case.seed)
    return TorchGenerator(model, spec, prompt, new_tokens, device)
