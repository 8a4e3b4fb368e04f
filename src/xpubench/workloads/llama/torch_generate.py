"""PyTorch greedy generation for the Llama model: ``backends/torch_/generate.py``'s ``TorchGenerator``
(prefill and decode steps timed apart by ``harness/generation.py``) over ``torch_model.LlamaTorch``,
whose grouped-query KV cache is (L, B, KV, T_max, D) in the compute dtype, allocated once for
``prompt_len + new_tokens - 1`` positions and overwritten by every round.
"""

from __future__ import annotations

import numpy as np
import torch

from xpubench.backends.torch_.generate import TorchGenerator
from xpubench.workloads.llama.checkpoint import Checkpoint
from xpubench.workloads.llama.config import LlamaConfig
from xpubench.workloads.llama.costs import DEFAULT_INT8_COMPUTE
from xpubench.workloads.llama.torch_model import PACKED_MAX_ROWS, LlamaTorch, build


def tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def int8_method(model: LlamaTorch) -> str | None:
    """How the int8 weights are used in the timed steps (None for float formats)."""
    if model.fmt != "int8":
        return None
    dense = f"F.linear(x, w.to({str(model.dtype).removeprefix('torch.')})) * per-row scale"
    packed = next((m.packed for _, m in model.projections()), False)
    if not packed:
        return f"int8 weights, per-row scales; dequantised in every step: {dense}"
    return (f"int8 weights, per-row scales; torch._weight_int8pack_mm for <= {PACKED_MAX_ROWS} rows (decode), "
            f"{dense} for more (prefill)")


class LlamaTorchGenerator(TorchGenerator):
    """prefill / decode / sync over a ``LlamaTorch``; see ``harness.generation.Generator``."""

    def __init__(self, model: LlamaTorch, prompt: np.ndarray, new_tokens: int, device: torch.device):
        super().__init__(model, model.cfg, prompt, new_tokens, device)

    @staticmethod
    def context(spec: LlamaConfig) -> int:
        return spec.max_positions

    def new_cache(self, spec: LlamaConfig, positions: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.new_cache(self.batch, positions)

    def info(self) -> dict:
        """The SDPA kernels (``TorchGenerator.info``), the KV cache's and the weights' bytes as
        allocated, the weight format and how int8 is computed."""
        weights = [m.weight for _, m in self.model.projections()] + \
                  [m.scale for _, m in self.model.projections() if m.int8] + \
                  [p for n, p in self.model.named_parameters() if "norm" in n]
        return {**super().info(), "kv_cache_bytes": tensor_bytes((self.cache.k, self.cache.v)),
                "weight_bytes": tensor_bytes(dict.fromkeys(weights, None)), "weight_format": self.model.fmt,
                "int8_method": int8_method(self.model)}


def torch_generator(cfg: LlamaConfig, fmt: str, prompt: np.ndarray, new_tokens: int, device: torch.device,
                    seed: int = 0, checkpoint: Checkpoint | None = None,
                    int8_compute: str = DEFAULT_INT8_COMPUTE) -> LlamaTorchGenerator:
    """A generator for one case: the checkpoint's weights (its config must be ``cfg``), else random
    ones from ``seed``, in ``fmt`` on ``device`` (fp32 means TF32 off); ``prompt`` (B, P) int ids."""
    from xpubench.backends.torch_.device import set_precision_mode

    set_precision_mode(fmt)
    model = build(cfg, fmt, device, seed, checkpoint, int8_compute)
    return LlamaTorchGenerator(model, prompt, new_tokens, device)


