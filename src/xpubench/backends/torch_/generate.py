"""PyTorch greedy generation with a preallocated KV cache (the measurement is ``harness/generation.py``).

The cache is two tensors (L, B, H, T_max, Q), keys and values, allocated once in the model's dtype for
``prompt_len + new_tokens - 1`` positions (the last token generated is never fed back) and reused by
every round: a prefill overwrites positions 0..P-1, each decode step writes one more and attends to the
positions written so far (a view, ``[:pos+1]``), so stale entries beyond are never read. Eager, under
``torch.inference_mode``; the model is the GPT of ``xpubench.workloads.gpt`` (``forward(idx, kv, pos,
last_only)``, built from ``spec``), already on the device in the precision to measure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from xpubench import backends
from xpubench.backends.torch_.attention import checked_kernel
from xpubench.backends.torch_.device import sync
from xpubench.harness.generation import cache_positions


@dataclass
class KVCache:
    k: torch.Tensor     # (L, B, H, T_max, Q)
    v: torch.Tensor
    pos: int = 0        # positions 0..pos-1 hold keys and values of the current sequences


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """(B, 1, V) logits of the last position -> (B,) token ids (argmax; ties to the lowest id)."""
    return logits[:, -1].argmax(-1)


class TorchGenerator:
    """prefill / decode / sync over a GPT module; see ``harness.generation.Generator``."""

    def __init__(self, model: torch.nn.Module, spec, prompt: np.ndarray, new_tokens: int, device: torch.device):
        self.model, self.device, self.attention = model.eval(), device, getattr(spec, "attention", "auto")
        self.batch, self.prompt_len = prompt.shape
        self.new_tokens = new_tokens
        positions = cache_positions(self.context(spec), self.prompt_len, new_tokens)
        self.prompt = torch.from_numpy(np.ascontiguousarray(prompt)).to(device)
        self.cache = KVCache(*self.new_cache(spec, positions))
        sync(device)

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
        logits = self.model(prompt, (cache.k, cache.v), 0, last_only=True)
        cache.pos = prompt.shape[1]
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
    """Bytes the tensors hold (each counted once)."""
    return sum(t.numel() * t.element_size() for t in dict.fromkeys(tensors))


class OwnCacheGenerator(TorchGenerator):
    """A TorchGenerator over a model that declares its generation layout itself (a workload's
    ``generation_models["torch"]``, e.g. workloads/llama): ``model.context`` (the positions it can attend
    to), ``model.new_cache(batch, positions)`` -> zeroed (keys, values) on its device, and
    ``model.generation_facts()`` -> untimed facts to record (its weights' bytes and format). The model
    is called as gpt's: ``model(idx, (keys, values), pos, last_only=True)``."""

    def __init__(self, model: torch.nn.Module, prompt: np.ndarray, new_tokens: int, device: torch.device):
        super().__init__(model, None, prompt, new_tokens, device)

    def context(self, spec) -> int:
        return self.model.context

    def new_cache(self, spec, positions: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.new_cache(self.batch, positions)

    def info(self) -> dict:
        """The SDPA kernels (``TorchGenerator.info``), the KV cache's bytes as allocated and the model's facts."""
        return {**super().info(), "kv_cache_bytes": tensor_bytes((self.cache.k, self.cache.v)),
                **self.model.generation_facts()}


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
        prompt = prompt_tokens(spec.vocab_size, case.batch_size or 1, prompt_len, case.seed)
        return OwnCacheGenerator(own(spec, case.precision, device, case.seed), prompt, new_tokens, device)
    model = backends.get("torch").build(workload, spec)
    if case.precision == "int8":
        model = int8_model(model, device)
    else:
        model = model.to(device=device, dtype=DTYPES[case.precision])
    prompt = prompt_tokens(spec.vocab_size, case.batch_size or 1, prompt_len, case.seed)
    return TorchGenerator(model, spec, prompt, new_tokens, device)
