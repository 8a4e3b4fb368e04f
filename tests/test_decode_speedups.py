"""The decode step at the hardware's limit (issue 33): torch's KV cache is one tensor per layer, so the
compiled step writes it in place (with one (L, ...) tensor, Inductor's code copied every layer's slice
and blended all layers back per layer: L x L cache reads per token); an eager int8 decode step multiplies
through ``torch._weight_int8pack_mm`` (the int8 weights read, dequantised in the kernel); a compiled CPU step
multiplies float and int8 weights in fused loops, blocks of rows side by side. Tiny models only; the compiled
checks read Inductor's generated code, never a timing."""

from __future__ import annotations

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.profiler import ProfilerActivity, profile

from xpubench.backends.torch_.generate import OwnCacheGenerator, tensor_bytes
from xpubench.harness.generation import generate
from xpubench.workloads.llama import costs
from xpubench.workloads.llama.config import LlamaConfig
from xpubench.workloads.llama.torch_model import LlamaTorch
from xpubench.workloads.llama.torch_weights import ROW_BLOCKS

CFG = LlamaConfig("tiny", n_layers=3, hidden_size=64, n_heads=4, n_kv_heads=2, head_dim=16, intermediate_size=96,
                  vocab_size=128, rope_theta=10_000.0, tie_embeddings=True, max_positions=64)
CPU = torch.device("cpu")
POSITIONS = 24


def model(fmt: str = "fp32") -> LlamaTorch:
    return LlamaTorch(CFG, fmt).init_random(seed=0, std=0.3).eval()


def prompt(length: int = 9) -> np.ndarray:
    return np.random.default_rng(1).integers(0, CFG.vocab_size, (1, length), dtype=np.int32)


def test_the_kv_cache_is_one_separate_tensor_per_layer_and_counts_its_bytes():
    keys, values = model().new_cache(1, POSITIONS)
    assert len(keys) == len(values) == CFG.n_layers
    storages = {t.untyped_storage().data_ptr() for t in (*keys, *values)}
    assert len(storages) == 2 * CFG.n_layers                   # no view of a shared (L, ...) tensor
    assert all(t.shape == (1, CFG.n_kv_heads, POSITIONS, CFG.head_dim) for t in keys)
    assert tensor_bytes((keys, values)) == POSITIONS * costs.kv_bytes_per_position(CFG, "fp32")


def test_the_static_decode_step_writes_each_layers_cache_in_place():
    m = model()
    gen = OwnCacheGenerator(m, prompt(), 8, CPU, decode="compiled")
    gen._step = m.decode_static                                # uncompiled: the same function, quick
    cache, token = gen.prefill(gen.prompt)
    before = [t.clone() for t in cache.k]
    cache, token = gen.decode(cache, token)
    pos = cache.pos - 1
    for layer, (old, new) in enumerate(zip(before, cache.k)):
        assert not torch.equal(old[:, :, pos], new[:, :, pos]), layer     # written at pos, into gen.cache
        assert torch.equal(old[:, :, :pos], new[:, :, :pos])
    assert cache.k is gen.cache.k


def int8pack_ran(fn) -> bool:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return any(e.name == "aten::_weight_int8pack_mm" for e in prof.events())


def test_an_int8_decode_step_multiplies_through_the_packed_int8_kernel():
    m = model("int8")
    if not m.layers[0].qkv.packed:
        pytest.skip("torch._weight_int8pack_mm does not run here")
    gen = OwnCacheGenerator(m, prompt(), 8, CPU)
    cache, token = gen.prefill(gen.prompt)
    assert int8pack_ran(lambda: gen.decode(cache, token))
    assert "torch._weight_int8pack_mm" in m.generation_facts()["int8_method"]
    weights = m.generation_facts()["weight_bytes"]               # int8 values + per-row scales, stored once
    per_row = sum(p.shape[0] * (p.shape[1] + 2) for _, p in m.projections())   # bf16 scales
    norms = sum(n.weight.numel() * 2 for n in m.modules() if type(n).__name__ == "RMSNorm")
    assert weights == per_row + norms


def compiled_code(fmt: str) -> tuple[str, OwnCacheGenerator]:
    from torch._inductor.utils import run_and_get_code

    gen = OwnCacheGenerator(model(fmt), prompt(), 6, CPU, decode="compiled")
    torch._dynamo.reset()          # a fresh compile (an earlier test's step of the same code is not reused)
    seconds, codes = run_and_get_code(gen.compile)   # the code of the generator's own step, compiled once
    assert seconds > 0                                # its compile timed
    return "\n".join(codes), gen


def one_row_products(code: str) -> list[str]:
    """The bodies of the parallel loops in Inductor's C++ that sum a weight row times an input vector (a load
    indexed by the row, x0, and the position in it, x1)."""
    loops = [chunk.split("#pragma omp", 1)[0] for chunk in code.split("#pragma omp for")[1:]]
    return [body for body in loops if "tmp_acc0_vec = tmp_acc0_vec +" in body and re.search(r"x1 \+ \d+L\*x0", body)]


def sums(body: str) -> int:
    """How many sums a loop body keeps in flight (Inductor's vector accumulators)."""
    return len(re.findall(r"tmp_acc(\d+)_vec = tmp_acc\1_vec \+", body))


def assert_blocked_products(code: str) -> None:
    """Each one-row projection (qkv, o, gate_up, down per layer, the head) is one loop that sums ROW_BLOCKS
    blocks of W's rows side by side, reading those rows and an input computed once, nothing more."""
    products = one_row_products(code)
    assert len(products) >= 4 * CFG.n_layers + 1
    for body in products:
        assert sums(body) == ROW_BLOCKS, body
        assert body.count("loadu(") == ROW_BLOCKS + 1 and "sqrt" not in body and "exp" not in body, body


@pytest.mark.slow
def test_the_compiled_decode_step_allocates_no_cache_sized_buffer():
    """Inductor's code for the step allocates nothing of a layer's cache shape (the old single-tensor
    cache made it copy each layer's slice and blend all layers back), multiplies each one-row projection in
    its own fused loop (no call of aten's GEMM: MKL's one-row GEMM is the slow path on a CPU) over an input
    computed before it (inlined, an RMS norm or silu(gate) * up was recomputed for every weight row:
    1.2-1.35x slower bf16 steps on an AMX Xeon), and generates the eager tokens."""
    code, gen = compiled_code("fp32")
    assert "extern_kernels.mm(" not in code and "extern_kernels.addmm(" not in code
    assert_blocked_products(code)
    cache_shape = f"({', '.join(map(str, gen.cache.k[0].shape))})"
    assert "empty_strided_cpu(" in code
    assert f"empty_strided_cpu({cache_shape}" not in code
    assert "select_scatter" not in code
    eager = generate(OwnCacheGenerator(gen.model, prompt(), 6, CPU))
    assert (generate(gen) == eager).all()
    assert gen.info()["decode_step"].startswith("compiled (torch.compile, mode=default")


@pytest.mark.slow
def test_the_compiled_int8_decode_step_sums_int8_rows_in_blocks_and_generates_the_eager_tokens():
    """Compiled for a CPU, an int8 step multiplies its int8 rows in the fused loops (faster than
    _weight_int8pack_mm's one row: torch_weights.py), the per-row scale applied to the sums."""
    code, gen = compiled_code("int8")
    assert "_weight_int8pack_mm(" not in code and "extern_kernels.mm(" not in code
    assert_blocked_products(code)
    for body in one_row_products(code):
        assert body.count("Vectorized<int8_t>::loadu(") == ROW_BLOCKS, body
    eager = generate(OwnCacheGenerator(gen.model, prompt(), 6, CPU))
    assert (generate(gen) == eager).all()
    assert "fused multiply-sums of the int8 rows" in gen.info()["int8_method"]
