"""JAX greedy generation with a fixed-size KV cache (the measurement is ``harness/generation.py``).

The cache is a pytree ``(kv, pos)``: ``kv`` a tuple over layers of (k, v) in the compute dtype (gpt's each
(B, T_max, H, Q); a model with its own cache, ``OwnCacheJaxGenerator``, lays it out itself: llama's
``flax_attention``), for ``depth + prompt_len + new_tokens - 1`` positions (the last token generated is never
fed back; ``depth`` positions written once before the rounds, which start after them: llama-bench's
-d), and ``pos`` an int32 scalar. It is allocated once, on the device, and donated to every call, so
XLA updates it in place. Prefill and decode are jitted and compiled ahead of time (``compile()``, timed
apart as compile_s); every decode step has the same shapes (the position is data, keys past it are
masked out), so one compiled program serves the whole round.

Precision: fp32 traces under ``jax.default_matmul_precision("highest")`` (true fp32, as in training);
bf16 / fp16 cast the parameters, activations and cache to that dtype.
"""

from __future__ import annotations

import os
import time
from contextlib import nullcontext
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from xpubench import backends
from xpubench.backends.jax_.attention import attention_kernel
from xpubench.backends.jax_.device import DTYPES
from xpubench.backends.jax_.model import cast_floats, matmul_precision
from xpubench.harness.generation import cache_positions


def greedy(logits: jax.Array) -> jax.Array:
    """(B, V) logits -> (B,) int32 token ids (argmax; ties to the lowest id)."""
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)


def _precision_scope(precision: str):
    mm = matmul_precision(precision)
    return jax.default_matmul_precision(mm) if mm != "default" else nullcontext()


class JaxGenerator:
    """prefill / decode / sync over a flax GPT; see ``harness.generation.Generator``."""

    def __init__(self, model: Any, spec: Any, params: Any, prompt: np.ndarray, new_tokens: int, device: Any,
                 precision: str = "fp32", depth: int = 0):
        self.batch, self.prompt_len = prompt.shape
        self.new_tokens, self.depth = new_tokens, depth
        positions = cache_positions(self.context(spec), depth + self.prompt_len, new_tokens)
        dtype = DTYPES.get(precision, jnp.float32)
        self.params = jax.device_put(cast_floats(params, dtype), device)
        self.prompt = jax.device_put(np.ascontiguousarray(prompt, dtype=np.int32), device)
        with jax.default_device(device):
            self.cache = jax.device_put((self.new_kv(spec, positions, dtype), jnp.int32(0)), device)

        def extend_at(start: int):
            def prefill(params, cache, prompt):
                kv, _ = cache
                with _precision_scope(precision):
                    logits, kv = model.apply({"params": params}, prompt, kv, start, method="extend")
                return (kv, jnp.int32(start + prompt.shape[1])), greedy(logits)
            return prefill

        prefill = extend_at(depth)
        if depth:   # untimed, once: the first ``depth`` positions written (llama-bench's -d); rounds start after them
            fill = np.resize(np.asarray(prompt, np.int32), (self.batch, depth))
            self.cache, _ = jax.jit(extend_at(0), donate_argnums=1)(self.params, self.cache, jnp.asarray(fill))

        def decode(params, cache, token):
            kv, pos = cache
            with _precision_scope(precision):
                logits, kv = model.apply({"params": params}, token[:, None], kv, pos, method="extend")
            return (kv, pos + 1), greedy(logits)

        self._jit_prefill = jax.jit(prefill, donate_argnums=1)
        self._jit_decode = jax.jit(decode, donate_argnums=1)
        self._prefill, self._decode = self._jit_prefill, self._jit_decode
        self._compiled: tuple[Any, Any] | None = None

    @staticmethod
    def context(spec) -> int:
        """Positions the model can attend to (a subclass for another model overrides it)."""
        return spec.block_size

    def new_kv(self, spec, positions: int, dtype) -> tuple:
        """Zeroed keys and values: a tuple over layers of (k, v), each (B, positions, H, Q)."""
        shape = (self.batch, positions, spec.n_head, spec.n_embd // spec.n_head)
        return tuple((jnp.zeros(shape, dtype), jnp.zeros(shape, dtype)) for _ in range(spec.n_layer))

    def compile(self) -> float:
        """Lower and compile prefill and decode for this batch and prompt length; seconds."""
        start = time.perf_counter()
        token = jax.ShapeDtypeStruct((self.batch,), jnp.int32)
        self._compiled = (self._jit_prefill.lower(self.params, self.cache, self.prompt).compile(),
                          self._jit_decode.lower(self.params, self.cache, token).compile())
        self._prefill, self._decode = self._compiled
        return time.perf_counter() - start

    def prefill(self, prompt: jax.Array) -> tuple[Any, jax.Array]:
        self.cache, token = self._prefill(self.params, self.cache, prompt)
        return self.cache, token

    def decode(self, cache: Any, token: jax.Array) -> tuple[Any, jax.Array]:
        self.cache, token = self._decode(self.params, cache, token)   # ``cache`` is donated
        return self.cache, token

    def sync(self, token: jax.Array) -> None:
        token.block_until_ready()

    def host(self, token: jax.Array) -> np.ndarray:
        return np.asarray(token)

    def info(self) -> dict:
        """The attention implementation each compiled program calls (compiles first if need be)."""
        if self._compiled is None:
            self.compile()
        prefill, decode = self._compiled
        return {"attention_kernel_prefill": attention_kernel(prefill),
                "attention_kernel_decode": attention_kernel(decode)}


def tree_bytes(tree) -> int:
    """Bytes the arrays of a pytree hold."""
    return sum(int(a.size) * a.dtype.itemsize for a in jax.tree.leaves(tree))


class OwnCacheJaxGenerator(JaxGenerator):
    """A JaxGenerator over a flax module that declares its generation layout itself (a workload's
    ``generation_models["jax"]``, e.g. workloads/llama): ``module.context`` (the positions it can attend
    to), ``module.new_kv(batch, positions)`` -> zeroed keys and values (a pytree), and
    ``module.generation_facts()`` -> untimed facts to record (its weights' format); its params come
    ready (their formats are the module's). ``extend(idx, kv, pos)`` as gpt's."""

    def __init__(self, module: Any, params: Any, prompt: np.ndarray, new_tokens: int, device: Any, precision: str,
                 depth: int = 0):
        self.module = module
        # XLA:CPU's thread pool has one thread per core this process may use
        self.threads = len(os.sched_getaffinity(0)) if device.platform == "cpu" and hasattr(os, "sched_getaffinity") \
            else None
        super().__init__(module, None, params, prompt, new_tokens, device, precision, depth)

    def context(self, spec) -> int:
        return self.module.context

    def new_kv(self, spec, positions: int, dtype) -> tuple:
        return self.module.new_kv(self.batch, positions)

    def info(self) -> dict:
        """The attention implementation (``JaxGenerator.info``), the KV cache's and the weights' bytes as
        allocated, and the module's facts."""
        return {**super().info(), "kv_cache_bytes": tree_bytes(self.cache[0]), "weight_bytes": tree_bytes(self.params),
                "decode_step": "compiled (jax.jit, XLA)", "threads": self.threads, **self.module.generation_facts()}


def generate_uncached(model: Any, params: Any, prompt: np.ndarray, new_tokens: int,
                      precision: str = "fp32") -> np.ndarray:
    """The reference: greedy decoding that runs the whole sequence so far through the model for every
    token (no cache). Returns (B, new_tokens) int32 ids. The sequence lives in a buffer of the final
    length (one compilation); the model is causal, so the positions after the last real token, still
    zeros, do not change its logits."""
    dtype = DTYPES.get(precision, jnp.float32)
    params = cast_floats(params, dtype)
    batch, length = prompt.shape

    @jax.jit
    def next_token(params, seq, last):
        with _precision_scope(precision):
            logits = model.apply({"params": params}, seq)
        return greedy(jax.lax.dynamic_index_in_dim(logits, last, axis=1, keepdims=False))

    seq = np.zeros((batch, length + new_tokens - 1), np.int32)
    seq[:, :length] = prompt
    out = []
    for i in range(new_tokens):
        token = np.asarray(next_token(params, seq, length + i - 1))
        out.append(token)
        if length + i < seq.shape[1]:
            seq[:, length + i] = token
    return np.stack(out, axis=1)


def generator_for(case) -> JaxGenerator:
    """The case's generator and a seeded random prompt batch. A workload with a generation model of its
    own (``generation_models["jax"]``: llama's weight formats, checkpoint weights) builds (module, params)
    on the device, in an ``OwnCacheJaxGenerator`` computing in the case's precision (int8 weights: in the
    module's ``compute_precision``). Else a model of the case's spec initialised from the case's seed
    (greedy decoding's speed does not depend on the weights' values), in the case's precision; int8 is
    not applicable there: JAX has no int8 path for such a model."""
    from xpubench.backends.base import Unsupported
    from xpubench.backends.jax_.device import jax_devices
    from xpubench.harness.generation import prompt_tokens
    from xpubench.workloads import get_workload

    workload = get_workload(case.workload)
    own = workload.generation_models.get("jax")
    if own is None and case.precision in ("int8", "int4"):
        raise Unsupported(f"{case.precision} generation is not applicable to jax: JAX/XLA has no built-in "
                          f"{case.precision} quantization of this model")
    spec = workload.spec_for(case.options)
    prompt_len, new_tokens = workload.generation_lengths(spec, case.options)
    (device,) = jax_devices(case.device)
    prompt = prompt_tokens(spec.vocab_size, case.batch_size, prompt_len, case.seed)
    if own is not None:
        module, params = own(spec, case.precision, device, case.seed)
        precision = case.precision if case.precision in DTYPES else module.compute_precision
        return OwnCacheJaxGenerator(module, params, prompt, new_tokens, device, precision, spec.depth)
    model = backends.get("jax").build(workload, spec)
    with jax.default_device(device):
        params = jax.jit(model.init)(jax.random.key(case.seed), prompt[:1, :1])["params"]
    return JaxGenerator(model, spec, params, prompt, new_tokens, device, case.precision)
