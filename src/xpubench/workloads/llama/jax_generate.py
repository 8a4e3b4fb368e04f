"""JAX greedy generation for the Llama model: ``backends/jax_/generate.py``'s ``JaxGenerator`` (prefill
and decode jitted and compiled ahead of time, the cache donated to every call so XLA updates it in
place, the position data so one decode program serves every step) over ``flax_model.LlamaFlax``, whose
grouped-query KV cache is a tuple over layers of (k, v), each (B, T_max, KV, D) in the compute dtype.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from xpubench.backends.jax_.generate import JaxGenerator
from xpubench.workloads.llama.checkpoint import Checkpoint
from xpubench.workloads.llama.config import LlamaConfig
from xpubench.workloads.llama.costs import DEFAULT_INT8_COMPUTE, compute_dtype
from xpubench.workloads.llama.flax_model import LlamaFlax, init_random, load_checkpoint

INT8_METHOD = ("int8 weights, per-output-channel scales; dequantised in the compiled step: "
               "(x @ w.astype({dtype})) * scale")


def tree_bytes(tree) -> int:
    return sum(int(a.size) * a.dtype.itemsize for a in jax.tree.leaves(tree))


class LlamaJaxGenerator(JaxGenerator):
    """prefill / decode / sync over a ``LlamaFlax``; see ``harness.generation.Generator``."""

    def __init__(self, model: LlamaFlax, params, prompt: np.ndarray, new_tokens: int, device):
        self.fmt = model.fmt
        self.dtype_name = compute_dtype(model.fmt, model.int8_compute)
        super().__init__(model, model.cfg, params, prompt, new_tokens, device, self.dtype_name)

    @staticmethod
    def context(spec: LlamaConfig) -> int:
        return spec.max_positions

    def new_kv(self, spec: LlamaConfig, positions: int, dtype) -> tuple:
        shape = (self.batch, positions, spec.n_kv_heads, spec.head_dim)
        return tuple((jnp.zeros(shape, dtype), jnp.zeros(shape, dtype)) for _ in range(spec.n_layers))

    def info(self) -> dict:
        """The attention implementation (``JaxGenerator.info``), the KV cache's and the weights' bytes
        as allocated, the weight format and how int8 is computed."""
        return {**super().info(), "kv_cache_bytes": tree_bytes(self.cache[0]), "weight_bytes": tree_bytes(self.params),
                "weight_format": self.fmt,
                "int8_method": INT8_METHOD.format(dtype=self.dtype_name) if self.fmt == "int8" else None}


def jax_generator(cfg: LlamaConfig, fmt: str, prompt: np.ndarray, new_tokens: int, device, seed: int = 0,
                  checkpoint: Checkpoint | None = None,
                  int8_compute: str = DEFAULT_INT8_COMPUTE) -> LlamaJaxGenerator:
    """A generator for one case: the checkpoint's weights (its config must be ``cfg``), else random
    ones from ``seed`` drawn on ``device``, in ``fmt``; ``prompt`` (B, P) int ids."""
    model = LlamaFlax(cfg, fmt, int8_compute)
    if checkpoint is not None:
        params = load_checkpoint(model, checkpoint)
    else:
        with jax.default_device(device):
            params = init_random(model, seed)
    return LlamaJaxGenerator(model, params, prompt, new_tokens, device)
