"""KV-cache generation (backends/*/generate.py): cached greedy decoding gives the tokens (and logits) of
uncached decoding in both frameworks; the JAX programs are compiled ahead of time; the attention
kernels of prefill and decode are recorded.

The weights are drawn with a large spread (std 0.3): with nanoGPT's 0.02 an untrained model's tied
head mostly repeats the last token, whatever the context, and a broken cache would go unnoticed. The
tests check that the generated tokens depend on more than the last token.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
pytest.importorskip("flax")

from quick_compile import quick_xla_in_process  # noqa: F401  (the module fixture, used by name)

from xpubench.backends.jax_.generate import JaxGenerator
from xpubench.backends.jax_.generate import generate_uncached as jax_uncached
from xpubench.backends.torch_.generate import TorchGenerator
from xpubench.backends.torch_.generate import generate_uncached as torch_uncached
from xpubench.harness.generation import generate, measure
from xpubench.workloads import gpt

# every JAX program here is compiled with XLA's optimisation mostly off: the tests compare tokens, logits and
# what is recorded, never a speed (the uncached reference alone compiles a program per length)
pytestmark = pytest.mark.usefixtures("quick_xla_in_process")

STD = 0.3
NEW = 12


def setup(attention: str = "auto"):
    spec = gpt.configure({"n_layer": 2, "n_head": 4, "n_embd": 64, "block_size": 32, "attention": attention})
    prompt = np.random.default_rng(1).integers(0, spec.vocab_size, (3, 9), dtype=np.int32)
    return spec, prompt


def torch_model(spec):
    torch.manual_seed(0)
    model = gpt.build_torch(spec)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, STD)
    return model.eval()


def jax_model(spec, prompt):
    model = gpt.build_jax(spec)
    shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), prompt))["params"]
    rng = np.random.default_rng(0)
    return model, jax.tree.map(lambda s: rng.normal(0.0, STD, s.shape).astype(s.dtype), shapes)


@pytest.fixture(scope="module")
def jax_fp32(request):
    """(spec, prompt, model, params, an fp32 JaxGenerator of NEW tokens) shared by the module's JAX tests: the
    generator's prefill and decode programs are compiled once (a later ``compile()`` of the same jitted functions
    is JAX's cached executable) and every test draws no weights of its own. Made after the module's compile
    setting (``quick_xla_in_process``), ended before it."""
    request.getfixturevalue("quick_xla_in_process")
    spec, prompt = setup()
    model, params = jax_model(spec, prompt)
    return spec, prompt, model, params, JaxGenerator(model, spec, params, prompt, NEW, jax.devices("cpu")[0])


def assert_context_matters(prompt: np.ndarray, tokens: np.ndarray) -> None:
    """Somewhere the same token is followed by different next tokens: the output is not a function
    of the last token alone."""
    assert tokens.shape == (len(prompt), NEW)
    followers: dict[int, set[int]] = {}
    for row in np.concatenate([prompt[:, -1:], tokens], axis=1).tolist():
        for a, b in itertools.pairwise(row):
            followers.setdefault(a, set()).add(b)
    assert any(len(f) > 1 for f in followers.values()), tokens


@pytest.mark.slow
def test_torch_cached_equals_uncached() -> None:
    spec, prompt = setup()
    model = torch_model(spec)
    gen = TorchGenerator(model, spec, prompt, NEW, torch.device("cpu"))
    cached = generate(gen)
    assert_context_matters(prompt, cached)
    np.testing.assert_array_equal(cached, torch_uncached(model, prompt, NEW))
    np.testing.assert_array_equal(generate(gen), cached)              # the cache is reused


def test_torch_cached_logits_equal_full_forward() -> None:
    spec, _ = setup()
    model = torch_model(spec)
    seq = torch.from_numpy(np.random.default_rng(2).integers(0, 256, (2, 12), dtype=np.int64))
    kv = [torch.zeros(2, 2, 4, 12, 16) for _ in range(2)]
    with torch.no_grad():
        full = model(seq)
        steps = [model(seq[:, :5], kv, 0, last_only=True)]
        steps += [model(seq[:, p:p + 1], kv, p, last_only=True) for p in range(5, 12)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full[:, 4:], rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_jax_cached_equals_uncached(jax_fp32) -> None:
    _, prompt, model, params, gen = jax_fp32
    assert gen.compile() > 0
    cached = generate(gen)
    assert_context_matters(prompt, cached)
    np.testing.assert_array_equal(cached, jax_uncached(model, params, prompt, NEW))
    np.testing.assert_array_equal(generate(gen), cached)              # the donated cache is reused


@pytest.mark.slow
def test_jax_cached_logits_equal_full_forward(jax_fp32) -> None:
    _, _, model, params, _ = jax_fp32
    seq = np.random.default_rng(2).integers(0, 256, (2, 12), dtype=np.int32)
    kv = tuple((np.zeros((2, 12, 4, 16), np.float32),) * 2 for _ in range(2))
    variables = {"params": params}
    prefill = jax.jit(lambda v, x, kv: model.apply(v, x, kv, 0, method="extend"))
    decode = jax.jit(lambda v, x, kv, pos: model.apply(v, x, kv, pos, method="extend"))
    with jax.default_matmul_precision("highest"):
        full = jax.jit(model.apply)(variables, seq)
        logits, kv = prefill(variables, seq[:, :5], kv)
        steps = [logits]
        for p in range(5, 12):
            logits, kv = decode(variables, seq[:, p:p + 1], kv, np.int32(p))
            steps.append(logits)
    np.testing.assert_allclose(np.stack(steps, axis=1), np.asarray(full[:, 4:]), rtol=1e-4, atol=1e-4)


def test_context_overflow_is_refused(jax_fp32) -> None:
    spec, prompt, model, params, _ = jax_fp32
    with pytest.raises(ValueError, match="the context is 32"):
        TorchGenerator(torch_model(spec), spec, prompt, 25, torch.device("cpu"))
    with pytest.raises(ValueError, match="the context is 32"):
        JaxGenerator(model, spec, params, prompt, 25, jax.devices("cpu")[0])


@pytest.mark.slow
def test_measure_records_the_kernels_torch() -> None:
    spec, prompt = setup(attention="math")
    gen = TorchGenerator(torch_model(spec), spec, prompt, 4, torch.device("cpu"))
    metrics, samples = measure(gen, budget_s=0.2)
    assert metrics["compile_s"] is None
    assert metrics["attention_kernel_prefill"] == metrics["attention_kernel_decode"] == "math"
    assert len(samples["decode_token_s"]) == 3 * metrics["rounds"] and min(samples["decode_token_s"]) > 0


@pytest.mark.slow
@pytest.mark.skipif(jax.default_backend() != "cpu", reason="auto may pick cuDNN off the CPU")
def test_measure_records_the_kernels_jax(jax_fp32) -> None:
    """A generator of its own: the shared one's programs may already be compiled (its compile_s a cache read)."""
    spec, prompt, model, params, _ = jax_fp32
    gen = JaxGenerator(model, spec, params, prompt, NEW, jax.devices("cpu")[0])
    metrics, _ = measure(gen, budget_s=0.2)
    assert metrics["compile_s"] > 0.01   # a real compile (a cached executable is read in ~1 ms)
    assert metrics["attention_kernel_prefill"] == metrics["attention_kernel_decode"] == "xla"


@pytest.mark.slow
def test_jax_bf16_generation_runs(jax_fp32) -> None:
    spec, prompt, model, params, _ = jax_fp32
    gen = JaxGenerator(model, spec, params, prompt, 4, jax.devices("cpu")[0], precision="bf16")
    gen.compile()
    assert gen.cache[0][0][0].dtype == jax.numpy.bfloat16
    assert generate(gen).shape == (3, 4)
