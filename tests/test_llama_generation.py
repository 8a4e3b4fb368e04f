"""Llama generation (the workload's generation models in backends/*/generate.py's OwnCache generators):
KV-cache decoding gives the tokens and logits of the uncached forward in both frameworks; JAX's decode
step compiles once for all tokens; int8 weight-only stays close to fp32; the bytes the generators
allocate are the bytes ``llama.costs`` computes; the harness's measurement runs over both.

Weights are drawn with std 0.3 (as tests/test_gpt_generation.py explains: with 0.02 an untrained model
mostly repeats one token and a broken cache goes unnoticed)."""

from __future__ import annotations

import numpy as np
import pytest
from quick_compile import quick_xla_in_process  # noqa: F401  (the fixture, used by name)

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
pytest.importorskip("flax")
pytestmark = pytest.mark.usefixtures("quick_xla_in_process")   # what is computed, not how fast

import dataclasses

from xpubench.backends.jax_.generate import OwnCacheJaxGenerator
from xpubench.backends.jax_.generate import generate_uncached as jax_uncached
from xpubench.backends.torch_.generate import OwnCacheGenerator
from xpubench.backends.torch_.generate import generate_uncached as torch_uncached
from xpubench.harness.generation import generate, measure
from xpubench.workloads.llama import costs
from xpubench.workloads.llama import flax_model as fm
from xpubench.workloads.llama import flax_params as fp
from xpubench.workloads.llama.config import LlamaConfig, RopeScaling
from xpubench.workloads.llama.spec import configure
from xpubench.workloads.llama.torch_model import LlamaTorch
from xpubench.workloads.llama.torch_weights import Proj, int8pack_available
from xpubench.workloads.llama.workload import WORKLOAD

CFG = LlamaConfig("tiny", n_layers=2, hidden_size=64, n_heads=4, n_kv_heads=2, head_dim=16, intermediate_size=96,
                  vocab_size=128, rope_theta=10_000.0, rope_scaling=RopeScaling(8.0, 1.0, 4.0, 32),
                  tie_embeddings=False, max_positions=64)
STD = 0.3
NEW = 16
CPU = torch.device("cpu")
SPEC = dataclasses.replace(configure({}), config=CFG)


def torch_generator(fmt: str, p: np.ndarray, new_tokens: int) -> OwnCacheGenerator:
    """The workload's torch generation model of CFG with random weights, as the backend builds it."""
    model = WORKLOAD.generation_models["torch"](SPEC, fmt, CPU, 0)
    return OwnCacheGenerator(model, p, new_tokens, CPU)


def jax_generator(fmt: str, p: np.ndarray, new_tokens: int) -> OwnCacheJaxGenerator:
    device = jax.devices("cpu")[0]
    module, params = WORKLOAD.generation_models["jax"](SPEC, fmt, device, 0)
    return OwnCacheJaxGenerator(module, params, p, new_tokens, device, module.compute_precision)


def prompt(batch: int = 2, length: int = 9) -> np.ndarray:
    return np.random.default_rng(1).integers(0, CFG.vocab_size, (batch, length), dtype=np.int32)


def torch_model(fmt: str = "fp32", **kw) -> LlamaTorch:
    return LlamaTorch(CFG, fmt, **kw).init_random(seed=0, std=STD).eval()


@pytest.fixture(scope="module")
def jax_params():
    """An fp32 model and its params, the matrices scaled from the init's std 0.02 to STD: drawn once for the
    module's tests (immutable arrays; each test builds its own generator, whose programs it compiles)."""
    model = fm.LlamaFlax(CFG, "fp32")
    return model, jax.tree.map(lambda p: p * (STD / fm.INIT_STD) if p.ndim == 2 else p, fp.init_random(model))


def context_matters(tokens: np.ndarray) -> bool:
    """Some row generates more than two distinct tokens: the output depends on more than a fixed point."""
    return any(len(set(row)) > 2 for row in tokens.tolist())


@pytest.mark.slow
def test_torch_cached_decoding_equals_uncached():
    model = torch_model()
    gen = OwnCacheGenerator(model, prompt(), NEW, CPU)
    cached = generate(gen)
    assert context_matters(cached)
    np.testing.assert_array_equal(cached, torch_uncached(model, prompt(), NEW))
    np.testing.assert_array_equal(generate(gen), cached)          # the preallocated cache is reused


def test_torch_cached_logits_equal_the_full_forward():
    model = torch_model()
    seq = torch.from_numpy(np.random.default_rng(2).integers(0, CFG.vocab_size, (2, 12)))
    cache = model.new_cache(2, 12)
    with torch.inference_mode():
        full = model(seq)
        steps = [model(seq[:, :5], cache, 0, last_only=True)]
        steps += [model(seq[:, i:i + 1], cache, i) for i in range(5, 12)]
    np.testing.assert_allclose(torch.cat(steps, 1).numpy(), full[:, 4:].numpy(), atol=1e-5, rtol=0)


@pytest.mark.slow
def test_jax_aot_compiled_cached_decoding_compiles_nothing_more_and_equals_uncached(jax_params):
    """The generator as the harness runs it (prefill and decode compiled ahead of time): generating compiles
    nothing more, and its tokens are the uncached forward's. (Two tests before, each compiling the same
    generator's prefill and decode: merged, every assertion kept.)"""
    from jax import monitoring

    model, params = jax_params
    gen = OwnCacheJaxGenerator(model, params, prompt(), NEW, jax.devices("cpu")[0], "fp32")
    assert gen.compile() > 0
    compiles: list[str] = []
    monitoring.register_event_duration_secs_listener(
        lambda name, *a, **k: compiles.append(name) if name == "/jax/core/compile/backend_compile_duration" else None)
    try:
        cached = generate(gen)
    finally:
        monitoring.clear_event_listeners()
    assert compiles == []
    assert context_matters(cached)
    np.testing.assert_array_equal(cached, jax_uncached(model, params, prompt(), NEW))


@pytest.mark.slow
def test_jax_decode_does_not_recompile_per_token(jax_params):
    """16 decode steps through the jitted (not AOT-compiled) functions: one trace and one XLA
    compilation of the decode step in all, counted by jax.monitoring's compile events and the jit cache."""
    from jax import monitoring

    model, params = jax_params
    gen = OwnCacheJaxGenerator(model, params, prompt(), NEW + 1, jax.devices("cpu")[0], "fp32")
    cache, token = gen.prefill(gen.prompt)
    compiles: list[str] = []
    monitoring.register_event_duration_secs_listener(
        lambda name, *a, **k: compiles.append(name) if name == "/jax/core/compile/backend_compile_duration" else None)
    try:
        for _ in range(NEW):
            cache, token = gen.decode(cache, token)
            token.block_until_ready()
    finally:
        monitoring.clear_event_listeners()
    assert len(compiles) == 1
    assert gen._jit_decode._cache_size() == 1


def test_torch_int8_weight_only_is_close_to_fp32():
    """At the init's std 0.02 (real checkpoints' scale; the test's std 0.3 amplifies any error)."""
    ref = LlamaTorch(CFG, "fp32").init_random(seed=0).eval()
    q = LlamaTorch(CFG, "int8", int8_compute="fp32")
    for (_, a), (_, b) in zip(ref.projections(), q.projections()):
        b.set_rows(0, a.weight.detach())
    idx = torch.from_numpy(prompt(2, 20).astype(np.int64))
    with torch.inference_mode():
        want, got = ref(idx), q(idx)
    err = (got - want).abs().max() / want.abs().max()
    assert 0 < err < 0.03
    assert q.layers[0].qkv.weight.dtype == torch.int8


@pytest.mark.skipif(not int8pack_available(CPU, torch.bfloat16), reason="no _weight_int8pack_mm on this CPU")
def test_int8_packed_kernel_equals_dequantised_matmul():
    proj = Proj(48, 64, torch.bfloat16, int8=True)
    proj.set_rows(0, torch.randn(48, 64))
    x = torch.randn(3, 64, dtype=torch.bfloat16)
    dequantised = proj(x)                       # packed is off: F.linear on the dequantised weight
    proj.packed = True
    packed = proj(x)
    assert not torch.equal(packed, torch.zeros_like(packed))
    torch.testing.assert_close(packed.float(), dequantised.float(), atol=0.05, rtol=0.02)


@pytest.mark.slow
def test_jax_int8_weight_only_is_close_to_fp32():
    model = fm.LlamaFlax(CFG, "fp32")
    params = fp.init_random(model)
    q_model = fm.LlamaFlax(CFG, "int8", int8_compute="fp32")
    q_params = fp.quantize_params(params, np.float32)
    idx = prompt(2, 20)
    with jax.default_matmul_precision("highest"):   # one jitted forward each (as the workload runs it), not op by op
        want = np.asarray(jax.jit(model.apply)({"params": params}, idx))
        got = np.asarray(jax.jit(q_model.apply)({"params": q_params}, idx))
    assert q_params["layers_0"]["qkv"]["kernel"].dtype == np.int8
    err = np.abs(got - want).max() / np.abs(want).max()
    assert 0 < err < 0.03


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["fp32", "bf16", "int8"])
def test_allocated_bytes_are_what_costs_computes(fmt):
    p = prompt(2, 9)
    want_kv = 2 * (9 + NEW - 1) * costs.kv_bytes_per_position(CFG, fmt)
    t = torch_generator(fmt, p, NEW).info()
    j = jax_generator(fmt, p, NEW).info()
    assert t["weight_bytes"] == j["weight_bytes"] == costs.weight_bytes(CFG, fmt)
    assert t["kv_cache_bytes"] == j["kv_cache_bytes"] == want_kv
    assert (t["int8_method"] is None) == (j["int8_method"] is None) == (fmt != "int8")


@pytest.mark.parametrize("framework", ["torch", pytest.param("jax", marks=pytest.mark.slow)])
def test_the_harness_measures_llama_generation(framework):
    p = prompt(1, 8)
    if framework == "torch":
        gen = torch_generator("bf16", p, 4)
    else:
        gen = jax_generator("bf16", p, 4)
    metrics, samples = measure(gen, budget_s=0.2)
    assert len(samples["decode_token_s"]) == 3 * metrics["rounds"]
    assert metrics["prefill_tokens_per_s"] > 0 and metrics["decode_tokens_per_s"] > 0
    assert metrics["kv_cache_bytes"] == 1 * 11 * costs.kv_bytes_per_position(CFG, "bf16")
    assert metrics["weight_format"] == "bf16"


@pytest.mark.slow
def test_jax_fp16_is_skipped_exactly_where_its_attention_does_not_compile():
    """jax 0.10 on the CPU: fp16 attention logits need an fp16 x fp16 -> fp32 dot XLA's CPU refuses. The
    backend's gate probes it, so the case is skipped with the reason where (and only where) it fails."""
    from xpubench import backends
    from xpubench.case import Case

    reason = backends.get("jax").unsupported(Case(workload="llama", backend="jax", device="cpu", mode="generate",
                                                  precision="fp16", batch_size=1))
    gen = jax_generator("fp16", prompt(1, 8), 4)
    if reason is None:
        assert gen.compile() > 0
    else:
        assert reason.startswith("float16 attention (jax.nn.dot_product_attention) does not compile on cpu")
        with pytest.raises(ValueError):
            gen.compile()
    assert backends.get("jax").unsupported(Case(workload="mnist_cnn", backend="jax", device="cpu", mode="train",
                                                precision="fp16", batch_size=256)) is None   # no attention: not gated
