"""Llama generation at its best and its llama-bench figures (issue 33): the static-cache decode step
(what torch.compile compiles) gives the eager step's tokens (compiled: tests/test_decode_speedups.py, whose
compiled step's tokens, compile time and label are checked there, on the same model class); a depth (llama-bench's
-d) gives the tokens of the longer prompt in both frameworks; int4 packs two values per byte and stays
close to fp32, the torch kernel equal to its dequantised matmul and torch's and JAX's packing the
same; JAX's float32-accumulating dots keep the outputs; params and size; energy per token, n/a with
the reason where no counter exists; the planner's --depth / --decode sweep. Tiny models only."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from quick_compile import quick_xla_in_process  # noqa: F401  (the fixture, used by name)

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
pytest.importorskip("flax")
pytestmark = pytest.mark.usefixtures("quick_xla_in_process")   # what is computed, not how fast

import jax.numpy as jnp

from xpubench.backends.jax_.generate import OwnCacheJaxGenerator, tree_bytes
from xpubench.backends.torch_.generate import OwnCacheGenerator
from xpubench.energy.meter import EnergyMeter, Unavailable
from xpubench.harness.generation import generate, measure
from xpubench.workloads.llama import costs
from xpubench.workloads.llama import flax_model as fm
from xpubench.workloads.llama import flax_params as fp
from xpubench.workloads.llama.config import LlamaConfig
from xpubench.workloads.llama.spec import case_options, configure
from xpubench.workloads.llama.torch_model import LlamaTorch
from xpubench.workloads.llama.torch_weights import Proj, quantize_groups, unpack_int4
from xpubench.workloads.llama.workload import WORKLOAD

CFG = LlamaConfig("tiny", n_layers=2, hidden_size=64, n_heads=4, n_kv_heads=2, head_dim=16, intermediate_size=96,
                  vocab_size=128, rope_theta=10_000.0, tie_embeddings=True, max_positions=64)
CPU = torch.device("cpu")
STD = 0.3     # tests/test_llama_generation.py: an untrained model at 0.02 mostly repeats one token


def prompt(batch: int = 2, length: int = 9) -> np.ndarray:
    return np.random.default_rng(1).integers(0, CFG.vocab_size, (batch, length), dtype=np.int32)


def torch_model(fmt: str = "fp32") -> LlamaTorch:
    return LlamaTorch(CFG, fmt).init_random(seed=0, std=STD).eval()


def test_the_static_decode_step_gives_the_eager_tokens():
    """decode_static (fixed shapes, the position a tensor, the whole cache masked) run uncompiled, so the
    test is quick: the same tokens as the eager step that slices the cache."""
    model, p = torch_model(), prompt()
    eager = generate(OwnCacheGenerator(model, p, 12, CPU))
    static = OwnCacheGenerator(model, p, 12, CPU, decode="compiled")
    static._step = model.decode_static
    assert (generate(static) == eager).all()
    assert any(len(set(row)) > 2 for row in eager.tolist())


@pytest.mark.parametrize("fmt", ["fp32", "int4"])
def test_torch_depth_gives_the_tokens_of_the_longer_prompt(fmt):
    model, p = torch_model(fmt), prompt()
    longer = np.concatenate([np.tile(p, 2)[:, :11], p], axis=1)   # fill() repeats the prompt
    assert (generate(OwnCacheGenerator(model, p, 8, CPU, depth=11)) == generate(OwnCacheGenerator(model, longer, 8,
                                                                                                   CPU))).all()


def jax_model(fmt: str):
    model = fm.LlamaFlax(CFG, fmt, dequant="fp32" if fmt in costs.QUANTISED else None)
    params = jax.tree.map(lambda a: a * (STD / fm.INIT_STD) if a.ndim == 2 else a, fp.init_random(fm.LlamaFlax(CFG)))
    if fmt == "bf16":
        params = jax.tree.map(lambda a: a.astype(jnp.bfloat16), params)
    elif fmt in costs.QUANTISED:
        params = fp.quantize_params(params, jnp.bfloat16, fmt)
    return model, params


@pytest.mark.slow
def test_jax_depth_gives_the_tokens_of_the_longer_prompt():
    model, params = jax_model("fp32")
    p, dev = prompt(), jax.devices("cpu")[0]
    longer = np.concatenate([np.resize(p, (2, 11)), p], axis=1)   # fill() as np.resize
    at_depth = OwnCacheJaxGenerator(model, params, p, 8, dev, "fp32", depth=11)
    assert (generate(at_depth) == generate(OwnCacheJaxGenerator(model, params, longer, 8, dev, "fp32"))).all()


@pytest.mark.slow
def test_int4_packs_two_per_byte_and_rounds_within_half_a_step():
    w = torch.randn(32, 64) * STD
    packed, scale, zero = quantize_groups(w, 32, torch.float32)
    assert packed.dtype == torch.uint8 and packed.shape == (32, 32) and scale.shape == (32, 2)
    q = unpack_int4(packed).float().reshape(32, 2, 32)
    back = ((q - 8) * scale[..., None] + zero[..., None]).reshape(32, 64)
    assert ((back - w).abs() <= scale.repeat_interleave(32, 1) / 2 + 1e-6).all()
    # JAX's packing (along a row, the input axis, of a kernel stored (out, in) as torch's) holds the same bytes
    jax_parts = fp._quantize_int4(jnp.asarray(w.numpy()), 1, jnp.float32, 32)
    assert np.array_equal(np.asarray(jax_parts[""]), packed.numpy())
    np.testing.assert_allclose(np.asarray(jax_parts["scale"]), scale.numpy(), rtol=1e-6)


def test_the_int4_kernel_equals_its_dequantised_matmul():
    proj = Proj(64, 96, torch.bfloat16, int4=True)
    proj.set_rows(0, torch.randn(64, 96) * STD)
    x = torch.randn(3, 96, dtype=torch.bfloat16)
    dense = torch.nn.functional.linear(x.float(), proj.dense(torch.float32))
    proj.use_int4_kernel(keep_rows=True)
    if proj.kernel is None:
        pytest.skip("no _weight_int4pack_mm_for_cpu in this torch")
    torch.testing.assert_close(proj(x).float(), dense, atol=0.05, rtol=0.02)


def jax_logits(fmt: str, p: np.ndarray) -> np.ndarray:
    """The fp32 logits of the model in ``fmt`` for the prompt ``p``: one jitted forward (as the workload runs it),
    not op by op (where every primitive of the int4 dequantisation compiled on its own: 3x the CPU time)."""
    model, params = jax_model(fmt)
    return np.asarray(jax.jit(model.apply)({"params": params}, p).astype(jnp.float32))


@pytest.fixture(scope="module")
def fp32_logits() -> tuple[np.ndarray, torch.Tensor]:
    """The reference of test_reduced_formats_stay_close_to_fp32, computed once for its three formats: JAX's and
    torch's fp32 logits for prompt()."""
    with torch.inference_mode():
        return jax_logits("fp32", prompt()), torch_model()(torch.from_numpy(prompt())).float()


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["bf16", "int8", "int4"])
def test_reduced_formats_stay_close_to_fp32(fmt, fp32_logits):
    """JAX (float32-accumulating dots, int8/int4 dequantised to float32) and torch: logits near fp32's."""
    p = prompt()
    ref, torch_ref = fp32_logits
    got = jax_logits(fmt, p)
    tolerance = {"bf16": 0.1, "int8": 0.1, "int4": 0.6}[fmt]   # relative to the logits' spread
    assert np.abs(got - ref).mean() < tolerance * ref.std()
    with torch.inference_mode():
        torch_got = torch_model(fmt)(torch.from_numpy(p)).float()
    assert (torch_got - torch_ref).abs().mean() < tolerance * torch_ref.std()


@pytest.mark.slow
def test_params_and_size_are_the_shapes_and_int4_allocates_what_costs_computes():
    cfg = dataclasses.replace(CFG, tie_embeddings=False)
    assert torch_model().n_params() == costs.param_count(CFG)
    spec = dataclasses.replace(configure({}), config=cfg)
    counts = WORKLOAD.generation_counts(spec, 1, 9, 4, "int4")
    assert counts["params"] == costs.param_count(cfg)
    assert counts["model_bytes"] == costs.weight_bytes(cfg, "int4")
    assert costs.weight_bytes(cfg, "int4") < costs.weight_bytes(cfg, "int8") / 1.5
    _module, params = WORKLOAD.generation_models["jax"](spec, "int4", jax.devices("cpu")[0], 0)
    assert tree_bytes(params) == costs.weight_bytes(cfg, "int4")
    assert fp.n_params(params) == costs.param_count(cfg)


def test_the_bound_counts_the_cache_at_depth():
    shallow = WORKLOAD.generation_counts(configure({}), 1, 512, 128, "bf16")
    deep = WORKLOAD.generation_counts(configure({"depth": 1024}), 1, 512, 128, "bf16")
    cfg = configure({}).config
    assert deep["decode_bytes_per_token"] - shallow["decode_bytes_per_token"] == \
        1024 * costs.kv_bytes_per_position(cfg, "bf16")
    assert deep["depth"] == 1024 and deep["prefill_flops"] > shallow["prefill_flops"]


class Ticking(EnergyMeter):
    """A counter that gains 10 J per second of its clock."""

    source = "test"

    def _read(self):
        return {"package": 10.0 * self._clock()}


@pytest.mark.slow
def test_energy_per_token_is_read_where_a_counter_exists_and_na_with_the_reason_elsewhere():
    gen = OwnCacheGenerator(torch_model(), prompt(1, 5), 4, CPU)
    metrics, _ = measure(gen, 0.05, meter=Ticking())
    assert metrics["idle_watts"] == pytest.approx(10.0, rel=0.05)
    assert metrics["decode_joules_per_token"] > 0 and abs(metrics["decode_net_joules_per_token"]) < 1e-3
    metrics, _ = measure(gen, 0.05, meter=Unavailable("no RAPL powercap zone here"))
    assert metrics["energy_na"] == "n/a: no RAPL powercap zone here"
    assert "decode_joules_per_token" not in metrics and "idle_watts" not in metrics


def test_depth_and_decode_sweep_one_case_each_depth_zero_keeping_the_old_key():
    swept = case_options({"preset": "smollm-135m", "depth": [0, 512], "decode": ["eager", "compiled"]})
    assert swept == [{"preset": "smollm-135m", "decode": "eager"}, {"preset": "smollm-135m", "decode": "compiled"},
                     {"preset": "smollm-135m", "depth": 512, "decode": "eager"},
                     {"preset": "smollm-135m", "depth": 512, "decode": "compiled"}]
    assert case_options({})[0] == {"decode": "compiled"}
    with pytest.raises(Exception, match="--decode must be one of compiled, eager"):
        configure({"decode": ["fast"]})
