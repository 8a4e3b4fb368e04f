"""The GPT workload (workloads/gpt.py): sizes, the same function in both frameworks, FLOPs against the
frameworks' counters, attention kernels chosen and recorded, AdamW's weight-decay split, options.

FLOPs: ``FlopCounterMode`` has no formula for the CPU's flash kernel
(``aten::_scaled_dot_product_flash_attention_for_cpu``: it would count attention as 0), so torch counts
under ``sdpa_kernel(MATH)``, whose matmuls (bmm) it sees. Training FLOPs use a cross-entropy loss, not
``sum()``: with an all-ones output gradient XLA folds the head's backward matmul into a reduction
(measured: 0.76 of the formula at GPT-2 width with ``sum()``, 1.002 with the loss). Measured ratios
(counted / analytic): small preset forward torch 0.993, XLA 1.077, training torch 0.993, XLA 1.036;
GPT-2 width (1 layer, T = 128) forward 1.000 / 1.002, training 1.000 / 1.002. XLA also counts the
LayerNorms, GELUs and softmaxes, which the formula leaves out.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
pytest.importorskip("flax")
optax = pytest.importorskip("optax")

import torch.nn.functional as F
from quick_compile import QUICK_XLA_OPTIONS, quick_xla_in_process  # noqa: F401  (the module fixture)
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from xpubench.backends import supports
from xpubench.backends.jax_.attention import attention_kernel
from xpubench.backends.torch_.attention import checked_kernel, sdpa_kernels
from xpubench.errors import UserError
from xpubench.workloads import REGISTRY, default_run, get_workload, gpt, names

# every JAX program here is compiled with XLA's optimisation mostly off (tests/quick_compile.py): the tests are
# about shapes, values, FLOP counts and kernels, never a speed
pytestmark = pytest.mark.usefixtures("quick_xla_in_process")

BATCH = 2
TOLERANCE = 0.15
GPT2_WIDE = {"preset": "gpt2", "n_layer": 1, "block_size": 128}   # GPT-2 small's width, fewer layers


def tokens(spec, batch: int = BATCH, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, spec.vocab_size, (batch, spec.block_size), dtype=np.int32)


def jax_params(spec, x: np.ndarray, std: float = 0.02) -> dict:
    """Parameters of the flax GPT's shapes drawn with numpy (tests where the values do not matter:
    compiling flax's init costs seconds on the CPU)."""
    shapes = jax.eval_shape(lambda: gpt.build_jax(spec).init(jax.random.key(0), x))["params"]
    rng = np.random.default_rng(0)
    return jax.tree.map(lambda s: rng.normal(0.0, std, s.shape).astype(s.dtype), shapes)


def test_registered_apart_from_the_model_wide_workloads() -> None:
    """gpt is in the default run and the listing (kind "transformer"), not among the "model" workloads that
    drive the model-wide tests; it has no Keras model, so no Keras backend runs it."""
    assert REGISTRY["gpt"] == "xpubench.workloads.gpt" and get_workload("gpt") is gpt.WORKLOAD
    assert "gpt" not in names("model") and names("transformer") == ["gpt", "llama"] and "gpt" in default_run()
    assert supports("torch", gpt.WORKLOAD) and supports("jax", gpt.WORKLOAD)
    assert not supports("keras:jax", gpt.WORKLOAD)


# ---- sizes ----------------------------------------------------------------------------------------

def test_gpt2_small_is_124m() -> None:
    """GPT-2 small: nanoGPT prints 123.69M (its get_num_params(): no position embeddings)."""
    spec = gpt.PRESETS["gpt2"]
    assert (spec.n_layer, spec.n_head, spec.n_embd, spec.block_size, spec.vocab_size) == (12, 12, 768, 1024, 50_304)
    assert spec.vocab_size % 64 == 0 and spec.vocab_size - 64 < 50_257 <= spec.vocab_size
    assert gpt.param_count(spec) == 124_475_904
    assert gpt.param_count(spec, non_embedding=True) == 124_475_904 - 1024 * 768


@pytest.mark.parametrize("options", [{}, {"n_layer": 3, "n_head": 2, "n_embd": 96, "block_size": 40}])
def test_parameter_counts_equal(options) -> None:
    spec = gpt.configure(options)
    torch_count = sum(p.numel() for p in gpt.build_torch(spec).parameters())   # tied weight once
    x = tokens(spec, batch=1)
    shapes = jax.eval_shape(lambda: gpt.build_jax(spec).init(jax.random.key(0), x))
    jax_count = sum(int(np.prod(a.shape)) for a in jax.tree.leaves(shapes["params"]))
    assert torch_count == jax_count == gpt.param_count(spec)


@pytest.mark.slow   # ~3.5 s: GPT-2's full shapes in both frameworks
def test_gpt2_parameter_counts_equal() -> None:
    spec = gpt.PRESETS["gpt2"]
    with torch.device("meta"):   # shapes only: no 500 MB of weights
        torch_count = sum(p.numel() for p in gpt.build_torch(spec).parameters())
    x = np.zeros((1, spec.block_size), np.int32)
    shapes = jax.eval_shape(lambda: gpt.build_jax(spec).init(jax.random.key(0), x))
    assert torch_count == sum(int(np.prod(a.shape)) for a in jax.tree.leaves(shapes["params"])) == 124_475_904


# ---- the same function ----------------------------------------------------------------------------

def torch_to_flax(model) -> dict:
    """Flax params holding the torch GPT's weights: Linear weight.T -> kernel, LayerNorm weight -> scale,
    ``h.0`` -> ``h_0``; the tied head has no parameters of its own."""
    params: dict = {}
    for name, t in model.state_dict().items():
        path = name.split(".")
        if len(path) > 1 and path[1].isdigit():
            path = [f"{path[0]}_{path[1]}", *path[2:]]
        *where, leaf = path
        array = t.detach().numpy()
        if leaf == "weight":
            if where[-1] in ("wte", "wpe"):
                leaf = "embedding"
            elif where[-1].startswith("ln"):
                leaf = "scale"
            else:
                leaf, array = "kernel", array.T
        node = params
        for key in where:
            node = node.setdefault(key, {})
        node[leaf] = np.ascontiguousarray(array)
    return params


@pytest.mark.slow
def test_same_function_in_both_frameworks() -> None:
    spec = gpt.configure({"block_size": 32})
    torch.manual_seed(0)
    tmodel = gpt.build_torch(spec).eval()
    x = tokens(spec)
    params = torch_to_flax(tmodel)
    init = jax.eval_shape(lambda: gpt.build_jax(spec).init(jax.random.key(0), x))["params"]   # the flax shapes
    assert jax.tree.structure(params) == jax.tree.structure(init)
    assert [a.shape for a in jax.tree.leaves(params)] == [a.shape for a in jax.tree.leaves(init)]
    with torch.no_grad():
        t_out = tmodel(torch.from_numpy(x)).numpy()
    with jax.default_matmul_precision("highest"):
        j_out = np.asarray(jax.jit(gpt.build_jax(spec).apply)({"params": params}, x))
    assert t_out.shape == j_out.shape == (BATCH, spec.block_size, spec.vocab_size)
    np.testing.assert_allclose(j_out, t_out, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_initialisation_follows_nanogpt() -> None:
    spec = gpt.configure({"n_layer": 2, "n_embd": 256, "block_size": 16})
    torch.manual_seed(0)
    tparams = dict(gpt.build_torch(spec).named_parameters())
    jparams = jax.jit(gpt.build_jax(spec).init)(jax.random.key(0), tokens(spec, batch=1))["params"]
    proj_std = 0.02 / np.sqrt(2 * spec.n_layer)
    for std, t, j in [(0.02, tparams["wte.weight"], jparams["wte"]["embedding"]),
                      (0.02, tparams["h.0.mlp.c_fc.weight"], jparams["h_0"]["mlp"]["c_fc"]["kernel"]),
                      (proj_std, tparams["h.0.mlp.c_proj.weight"], jparams["h_0"]["mlp"]["c_proj"]["kernel"])]:
        assert float(t.detach().std()) == pytest.approx(std, rel=0.05)
        assert float(np.std(np.asarray(j))) == pytest.approx(std, rel=0.05)
    assert float(tparams["h.0.attn.c_attn.bias"].detach().abs().max()) == 0.0
    assert float(np.abs(np.asarray(jparams["h_0"]["attn"]["c_attn"]["bias"])).max()) == 0.0


# ---- FLOPs ----------------------------------------------------------------------------------------

def _torch_counted(spec, x: np.ndarray, train: bool) -> float:
    """Counted on the meta device: the same aten ops with the same shapes, so the same count (checked: 243,269,632
    forward FLOPs per sample at the small preset on the CPU and on meta), without drawing or multiplying weights."""
    with torch.device("meta"):
        model = gpt.build_torch(spec)
    xt = torch.from_numpy(x).to("meta")
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        if train:
            out = model(xt)
            F.cross_entropy(out.reshape(-1, out.shape[-1]), xt.long().reshape(-1)).backward()
        else:
            with torch.no_grad():
                model(xt)
    return counter.get_total_flops() / len(x)


def _xla_counted(spec, x: np.ndarray, train: bool) -> float:
    model = gpt.build_jax(spec)
    params = jax.eval_shape(lambda: model.init(jax.random.key(0), x))["params"]   # lowering needs shapes only
    if train:
        def loss(p, x):
            return optax.softmax_cross_entropy_with_integer_labels(model.apply({"params": p}, x), x).mean()
        fn = jax.grad(loss)
    else:
        def fn(p, x):
            return model.apply({"params": p}, x)
    cost = jax.jit(fn).lower(params, x).compile(QUICK_XLA_OPTIONS).cost_analysis()
    if isinstance(cost, (list, tuple)):   # older JAX: one dict per program
        return sum(c.get("flops", 0.0) for c in cost) / len(x)
    return cost["flops"] / len(x)


@pytest.mark.slow
@pytest.mark.parametrize("options", [{}, GPT2_WIDE], ids=["small", "gpt2-wide"])
@pytest.mark.parametrize("train", [False, True], ids=["forward", "training"])
def test_flops_match_torch_and_xla(options, train) -> None:
    spec = gpt.configure(options)
    x = tokens(spec)
    analytic = gpt.forward_flops(spec) * (spec.train_flops_factor if train else 1)
    for counter in (_torch_counted, _xla_counted):
        counted = counter(spec, x, train)
        assert abs(counted - analytic) <= TOLERANCE * analytic, (counter.__name__, analytic, counted)


def test_flops_formula() -> None:
    """6N + 12·L·H·Q·T per training token; forward per sample T·(2N + 4·L·C·T)."""
    spec = gpt.PRESETS["gpt2"]
    n = gpt.param_count(spec, non_embedding=True)
    assert gpt.train_flops_per_token(spec) == 6 * n + 12 * 12 * 12 * 64 * 1024
    assert gpt.forward_flops(spec) == 1024 * (2 * n + 4 * 12 * 768 * 1024)
    assert spec.train_flops_factor * gpt.forward_flops(spec) == 1024 * gpt.train_flops_per_token(spec)


# ---- attention kernels ----------------------------------------------------------------------------

def _torch_kernel(attention: str, train: bool = False) -> str | None:
    spec = gpt.configure({"n_layer": 1, "block_size": 16, "attention": attention})
    model = gpt.build_torch(spec)
    x = torch.from_numpy(tokens(spec))
    if train:
        return sdpa_kernels(lambda: model(x))
    with torch.no_grad():
        return sdpa_kernels(lambda: model(x))


def test_torch_records_the_kernel_asked_for() -> None:
    assert _torch_kernel("math") == "math"
    assert _torch_kernel("flash") == "flash"          # the CPU's flash kernel
    assert _torch_kernel("flash", train=True) == "flash"
    assert _torch_kernel("auto") in {"flash", "efficient", "cudnn", "math"}


def test_torch_kernel_other_than_asked_is_refused() -> None:
    spec = gpt.configure({"n_layer": 1, "block_size": 16, "attention": "math"})
    model, x = gpt.build_torch(spec), torch.from_numpy(tokens(spec))
    assert checked_kernel("math", lambda: model(x)) == checked_kernel("auto", lambda: model(x)) == "math"
    with pytest.raises(RuntimeError, match="'flash' was asked for, but 'math' ran"):
        checked_kernel("flash", lambda: model(x))
    assert checked_kernel("auto", lambda: torch.ones(2) * 2) == "compiled"
    with pytest.raises(RuntimeError, match="'math' was asked for, but 'compiled' ran"):
        checked_kernel("math", lambda: torch.ones(2) * 2)


@pytest.mark.slow
def test_torch_compile_overrides_the_kernel_asked_for() -> None:
    """Why the check exists: Inductor puts its own attention kernel in (torch 2.13 on the CPU)."""
    spec = gpt.configure({"n_layer": 1, "block_size": 16, "attention": "math"})
    model, x = gpt.build_torch(spec), torch.from_numpy(tokens(spec))
    compiled = torch.compile(model)
    compiled(x)
    with pytest.raises(RuntimeError, match="'math' was asked for"):
        checked_kernel("math", lambda: compiled(x))


def test_torch_records_nothing_without_attention() -> None:
    assert sdpa_kernels(lambda: torch.ones(3) @ torch.ones(3)) is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="these kernels exist on CUDA")
@pytest.mark.parametrize("attention", ["efficient", "cudnn"])
def test_torch_kernel_that_cannot_run_is_an_error(attention) -> None:
    with pytest.raises(RuntimeError, match=f"attention kernel '{attention}' cannot run here"):
        _torch_kernel(attention)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="auto may pick cuDNN off the CPU")
@pytest.mark.slow   # ~1 s each: a GPT forward compiled
@pytest.mark.parametrize("attention", ["auto", "xla"])
def test_jax_records_the_implementation(attention) -> None:
    spec = gpt.configure({"n_layer": 1, "block_size": 16, "attention": attention})
    model, x = gpt.build_jax(spec), tokens(spec)
    shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), x))["params"]   # compiling needs shapes only
    compiled = jax.jit(lambda p, x: model.apply({"params": p}, x)).lower(shapes, x).compile()
    assert attention_kernel(compiled) == "xla"


def test_jax_recorder_sees_a_cudnn_custom_call() -> None:
    class Compiled:   # what a GPU program calling cuDNN's fused attention holds
        def as_text(self) -> str:
            return 'custom_call_target="__cudnn$fmhaSoftmax"'

    assert attention_kernel(Compiled()) == "cudnn"


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="cuDNN may exist off the CPU")
def test_jax_cudnn_on_cpu_is_an_error() -> None:
    spec = gpt.configure({"n_layer": 1, "block_size": 16, "attention": "cudnn"})
    with pytest.raises(RuntimeError, match="cuDNN"):
        jax_params(spec, tokens(spec))


def test_attention_names_checked_per_framework() -> None:
    with pytest.raises(UserError, match="does not exist in jax"):
        gpt.build_jax(gpt.configure({"attention": "flash"}))
    with pytest.raises(UserError, match="does not exist in torch"):
        gpt.build_torch(gpt.configure({"attention": "xla"}))


# ---- options --------------------------------------------------------------------------------------

def test_configure_presets_and_sizes() -> None:
    assert gpt.configure({}) == gpt.SPEC == gpt.PRESETS["small"]
    assert gpt.configure({"preset": "gpt2", "sync": "step"}) == gpt.PRESETS["gpt2"]   # other keys ignored
    spec = gpt.configure({"preset": "gpt2", "n_layer": 2, "block_size": 64})
    assert (spec.n_layer, spec.n_embd, spec.block_size, spec.target_shape) == (2, 768, 64, (64,))
    assert spec.vocab_size == 50_304 and spec.optimizer == "adamw"


@pytest.mark.parametrize(("options", "message"), [
    ({"preset": "huge"}, "unknown preset"),
    ({"n_layer": 0}, "positive integer"),
    ({"n_embd": "wide"}, "positive integer"),
    ({"block_size": True}, "positive integer"),
    ({"n_embd": 100, "n_head": 3}, "multiple of n_head"),
    ({"attention": "fast"}, "attention must be one of"),
])
def test_configure_refuses_bad_options(options, message) -> None:
    with pytest.raises(UserError, match=message):
        gpt.configure(options)


# ---- AdamW's weight-decay split -------------------------------------------------------------------

@pytest.mark.slow
def test_weight_decay_only_on_matrices() -> None:
    """With zero gradients AdamW's update is the decay alone: p <- p (1 - lr·wd) for parameters of
    >= 2 dimensions, unchanged for biases and LayerNorm parameters. Both frameworks."""
    spec = dataclasses.replace(gpt.configure({"n_layer": 1, "block_size": 8}), weight_decay=0.5)
    lr, shrink = 0.1, 1 - 0.1 * 0.5
    model = gpt.build_torch(spec)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = gpt.torch_optimizer(model.parameters(), spec, lr)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    for name, p in model.named_parameters():
        factor = shrink if p.dim() >= 2 else 1.0
        torch.testing.assert_close(p.detach(), before[name] * factor, msg=name)

    params = jax_params(spec, tokens(spec, batch=1))
    tx = gpt.jax_optimizer(spec, lr)
    zeros = jax.tree.map(np.zeros_like, params)
    updates, _ = jax.jit(tx.update)(zeros, tx.init(params), params)
    after = optax.apply_updates(params, updates)
    for p, q in zip(jax.tree.leaves(params), jax.tree.leaves(after)):
        np.testing.assert_allclose(np.asarray(q), np.asarray(p) * (shrink if p.ndim >= 2 else 1.0), rtol=1e-6)


# ---- on a GPU (not run on the CPU-only machines this was written on) --------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("attention", ["flash", "efficient", "math"])
def test_torch_cuda_records_the_kernel_asked_for(attention) -> None:
    spec = gpt.configure({"n_layer": 1, "n_head": 4, "n_embd": 256, "block_size": 64, "attention": attention})
    model = gpt.build_torch(spec).to("cuda", torch.bfloat16)
    x = torch.from_numpy(tokens(spec)).to("cuda")
    assert sdpa_kernels(lambda: model(x)) == attention


@pytest.mark.gpu
def test_jax_gpu_records_cudnn() -> None:
    # asked here, not at import: that would start JAX in pytest (a TPU is then held)
    if jax.default_backend() != "gpu":
        pytest.skip("needs a GPU for jax")
    spec = gpt.configure({"n_layer": 1, "n_head": 4, "n_embd": 256, "block_size": 64, "attention": "cudnn"})
    model, x = gpt.build_jax(spec), tokens(spec)
    params = jax.tree.map(lambda a: a.astype(jax.numpy.bfloat16), jax_params(spec, x))   # cuDNN: 16-bit only
    compiled = jax.jit(lambda p, x: model.apply({"params": p}, x)).lower(params, x).compile()
    assert attention_kernel(compiled) == "cudnn"
