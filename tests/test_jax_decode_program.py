"""The JAX decode step at the hardware's limit (issue 33), read from the optimized HLO XLA compiles for it
(never a timing): at batch 1 every float32 projection is a matrix-vector ``dot`` of the weight parameter
itself, not a loop fusion that recomputes its input (the RMS norm, the embedding lookup) for every weight
row (1.56x slower fp32 steps on an AMX Xeon); bf16, int8 and int4 weights are converted inside the product's
loop, never written out as a float32 copy. Tiny model, default XLA options (fusion is what is tested)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")

from xpubench.backends.jax_.generate import OwnCacheJaxGenerator
from xpubench.harness.generation import cache_positions
from xpubench.workloads.llama.config import LlamaConfig
from xpubench.workloads.llama.spec import configure
from xpubench.workloads.llama.workload import WORKLOAD

CFG = LlamaConfig("tiny", n_layers=2, hidden_size=64, n_heads=4, n_kv_heads=2, head_dim=16, intermediate_size=96,
                  vocab_size=128, rope_theta=10_000.0, tie_embeddings=True, max_positions=64)
PROJECTIONS = 4 * CFG.n_layers + 1    # qkv, o, gate_up, down per layer; the (tied) head


def decode_program(fmt: str) -> str:
    """The optimized HLO of the decode step the generator measures (its entry computation)."""
    device = jax.devices("cpu")[0]
    module, params = WORKLOAD.generation_models["jax"](dataclasses.replace(configure({}), config=CFG), fmt, device, 0)
    prompt = np.random.default_rng(1).integers(0, CFG.vocab_size, (1, 9), dtype=np.int32)
    gen = OwnCacheJaxGenerator(module, params, prompt, 4, device, module.compute_precision)
    gen.compile()
    return gen._compiled[1].as_text().split("\nENTRY ", 1)[1]


def test_float32_projections_are_dots_of_the_weights_themselves():
    entry = decode_program("fp32")
    assert len(re.findall(r" dot\(%params__", entry)) == PROJECTIONS, entry


@pytest.mark.parametrize("fmt", ["bf16", "int8", "int4"])
def test_reduced_weights_are_converted_inside_the_products_loop(fmt):
    """int4 too: its weights are dequantised in the step, and a float32 one-row dot of them wrote them out whole
    first (3 tok/s at smollm-135m)."""
    entry = decode_program(fmt)
    copies = re.findall(r"= f32\[(\d+),(\d+)\]\S* (?:fusion|convert)\(%params__", entry)
    assert not copies, copies    # no float32 copy of a weight is written


INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%([\w.-]+) = (\w+)\[([\d,]*)\]\S* ([\w-]+)\(([^)]*)\)", re.MULTILINE)


def instructions(entry: str) -> dict:
    """name -> (dims, op, operand names) for each instruction of the entry computation."""
    return {m[1]: (tuple(int(d) for d in m[3].split(",") if d), m[4], re.findall(r"%([\w.-]+)", m[5]))
            for m in INSTRUCTION.finditer(entry)}


@pytest.mark.parametrize("fmt", ["fp32", "bf16"])
def test_the_decode_step_writes_the_cache_in_place_and_copies_none_of_it(fmt):
    """Nothing the size of one layer's keys is made but the in-place update: no transposed or copied cache
    (the (B, T, KV, D) layout made XLA transpose every layer's keys at every token; a 4-D (B, KV, T, D) one
    copied the whole cache)."""
    entry = decode_program(fmt)
    layer_cache = CFG.n_kv_heads * cache_positions(CFG.max_positions, 9, 4) * CFG.head_dim   # one sequence
    sized = {name: op for name, (dims, op, _) in instructions(entry).items()
             if int(np.prod(dims)) == layer_cache and op not in ("parameter", "bitcast", "get-tuple-element")}
    assert sized and all("dynamic-update-slice" in name for name in sized), sized


def test_every_bf16_product_reads_its_input_as_one_flat_row():
    """The fused matrix-vector loops' inputs are rows (one dimension above 1), never the attention's
    (KV, H/KV, D) or (B, 1, H, D) output, which XLA:CPU reads element by element (10x slower at smollm-135m)."""
    entry = decode_program("bf16")
    found = instructions(entry)
    products = [(name, operands) for name, (dims, op, operands) in found.items()
                if op == "fusion" and "dot" in name and any(o.startswith("params__") for o in operands)]
    assert len(products) == PROJECTIONS, products
    for name, operands in products:
        inputs = [found[o][0] for o in operands if not o.startswith("params__")]
        assert inputs and all(sum(d > 1 for d in dims) == 1 for dims in inputs), (name, inputs)
