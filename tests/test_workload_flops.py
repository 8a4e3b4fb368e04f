"""Each workload's analytic forward_flops agrees (within 15%) with what the frameworks count.

- PyTorch: ``torch.utils.flop_counter.FlopCounterMode`` counts matmuls and convolutions (aten mm,
  addmm, bmm, convolution). On the CPU, ``nn.LSTM`` runs oneDNN's fused ``mkldnn_rnn_layer``, which it
  does not see (it reports 0); with oneDNN disabled, ``nn.LSTM`` runs the reference ATen
  implementation (one addmm/mm per gate matmul per step, the same maths), which it counts.
- JAX: XLA's ``compiled.cost_analysis()["flops"]``. It counts a ``while`` loop's body once, not
  times its trip count (checked: a 1-, 10- and 20-step ``lax.scan`` report the same FLOPs), so the
  recurrent models are compiled with ``unroll=True`` (``model.copy(unroll=True)``): the straight-line
  program is counted in full. XLA also counts elementwise ops (bias adds, activations, pooling, batch
  norm), which the analytic formulas leave out, and it counts a padded convolution's multiply-adds
  with real input pixels only (not with the zero padding): ResNet-20 comes out ~6.6% below the
  analytic figure, the MNIST CNN ~2%. Measured ratios XLA / analytic: 0.98 (CNN), 0.93 (ResNet-20),
  1.04 (IMDB, 12 steps), 1.005 (Shakespeare), 1.006 (weather); torch / analytic: 1.000 for all.

Sequence models use short sequences: their formulas are linear in the length.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
pytest.importorskip("flax")

from quick_compile import QUICK_XLA_OPTIONS, quick_xla_in_process  # noqa: F401  (the module fixture)
from torch.utils.flop_counter import FlopCounterMode

from xpubench.workloads import get_workload, names
from xpubench.workloads.base import WorkloadSpec

# every JAX program here is compiled with XLA's optimisation mostly off (tests/quick_compile.py): the tests are
# about FLOP counts and compiled text, never a speed
pytestmark = pytest.mark.usefixtures("quick_xla_in_process")

BATCH = 2
TOLERANCE = 0.15
SHORT = {  # name -> (input_shape, target_shape)
    "imdb_lstm": ((12,), ()),
    "shakespeare_lstm": ((8,), (8,)),
    "weather_gru": ((16, 20), (16, 3)),
}


def spec_for(name: str) -> WorkloadSpec:
    spec = get_workload(name).spec
    if name in SHORT:
        input_shape, target_shape = SHORT[name]
        spec = dataclasses.replace(spec, input_shape=input_shape, target_shape=target_shape)
    return spec


def sample_input(spec: WorkloadSpec) -> np.ndarray:
    rng = np.random.default_rng(0)
    if spec.input_kind == "tokens":
        return rng.integers(0, spec.vocab_size, (BATCH, *spec.input_shape), dtype=np.int32)
    return rng.random((BATCH, *spec.input_shape), dtype=np.float32)


def torch_flops_per_sample(name: str, spec: WorkloadSpec) -> float:
    model = get_workload(name).models["torch"](spec).eval()
    x = torch.from_numpy(sample_input(spec))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # mkldnn.flags warns about TF32 on Intel GPUs
        with torch.no_grad(), torch.backends.mkldnn.flags(enabled=False), FlopCounterMode(display=False) as fc:
            model(x)
    return fc.get_total_flops() / BATCH


def xla_flops(compiled) -> float:
    """``cost_analysis()`` is a dict in recent JAX, a list with one dict per program in older ones."""
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):
        return float(sum(c.get("flops", 0.0) for c in cost))
    return float(cost["flops"])


def jax_flops_per_sample(name: str, spec: WorkloadSpec) -> float:
    model = get_workload(name).models["jax"](spec)
    if hasattr(model, "unroll"):
        model = model.copy(unroll=True)  # count every step, not the loop body once (see above)
    x = sample_input(spec)
    variables = jax.eval_shape(lambda: model.init(jax.random.key(0), x, train=False))  # lowering needs shapes only
    compiled = jax.jit(lambda v, x: model.apply(v, x, train=False)).lower(variables, x).compile(QUICK_XLA_OPTIONS)
    return xla_flops(compiled) / BATCH


@pytest.mark.parametrize("name", names("model"))
def test_flops_match_torch(name: str) -> None:
    spec = spec_for(name)
    analytic = get_workload(name).forward_flops(spec)
    counted = torch_flops_per_sample(name, spec)
    assert counted > 0
    assert abs(counted - analytic) <= TOLERANCE * analytic, (analytic, counted)


@pytest.mark.slow
@pytest.mark.parametrize("name", names("model"))
def test_flops_match_xla(name: str) -> None:
    spec = spec_for(name)
    analytic = get_workload(name).forward_flops(spec)
    counted = jax_flops_per_sample(name, spec)
    assert abs(counted - analytic) <= TOLERANCE * analytic, (analytic, counted)


def test_full_length_flops() -> None:
    """The published per-sample figures (docs/workloads.md)."""
    expected = {
        "mnist_cnn": 4_420_608,
        "fashion_cnn": 4_420_608,
        "cifar10_resnet": 81_102_080,
        "imdb_lstm": 26_400_200,
        "shakespeare_lstm": 865_075_200,
        "weather_gru": 2_200_633_344,
    }
    assert {name: get_workload(name).forward_flops(get_workload(name).spec) for name in expected} == expected


def test_flops_linear_in_sequence_length() -> None:
    for name, (input_shape, _) in SHORT.items():
        spec = get_workload(name).spec
        head = dataclasses.replace(spec, input_shape=input_shape)
        full, short = get_workload(name).forward_flops(spec), get_workload(name).forward_flops(head)
        if name == "imdb_lstm":  # the dense head runs once, after the last step
            full, short = full - 200, short - 200
        assert full * input_shape[0] == short * spec.input_shape[0]


# --- training FLOPs: the 3x factor behind achieved FLOP/s and MFU -----------------------------------
# Measured ratios counted / (3 x analytic forward), forward + backward of a summed output (torch;
# XLA: the jitted grad): mnist_cnn 0.970 / 0.981, cifar10_resnet 0.996 / 0.933, imdb_lstm 0.979 / 1.124,
# shakespeare_lstm 0.980 / 1.048, weather_gru 0.968 / 1.056. Below 1 in torch: no input gradient is
# needed for the first layer (images) and an embedding's backward is not a matmul.

@pytest.mark.slow
@pytest.mark.parametrize("name", ["mnist_cnn", "shakespeare_lstm"])
def test_training_flops_factor_matches_forward_plus_backward(name: str) -> None:
    spec = spec_for(name)
    wl = get_workload(name)
    analytic = wl.forward_flops(spec) * spec.train_flops_factor
    assert spec.train_flops_factor == 3

    model = wl.models["torch"](spec)
    x = torch.from_numpy(sample_input(spec))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.backends.mkldnn.flags(enabled=False), FlopCounterMode(display=False) as fc:
            model(x).float().sum().backward()
    counted = fc.get_total_flops() / BATCH
    assert abs(counted - analytic) <= TOLERANCE * analytic, ("torch", analytic, counted)

    jmodel = wl.models["jax"](spec)
    if hasattr(jmodel, "unroll"):
        jmodel = jmodel.copy(unroll=True)
    xs = sample_input(spec)
    # lowering needs shapes only: the init is traced, not compiled and run
    variables = jax.eval_shape(lambda: jmodel.init(jax.random.key(0), xs, train=False))
    assert set(variables) == {"params"}     # nothing else (batch statistics) to close over in the loss

    def loss(params, x):
        return jmodel.apply({"params": params}, x, train=False).astype(np.float32).sum()

    counted = xla_flops(jax.jit(jax.grad(loss)).lower(variables["params"], xs).compile(QUICK_XLA_OPTIONS)) / BATCH
    assert abs(counted - analytic) <= TOLERANCE * analytic, ("xla", analytic, counted)


# --- what the JAX train step is compiled as (backends/jax_/train.py) --------------------------------

def _lowered_train_step(precision: str) -> str:
    from xpubench.backends.jax_.train import JaxTrainer
    from xpubench.case import Case

    t = JaxTrainer(Case(workload="mnist_cnn", backend="jax", device="cpu", mode="train", precision=precision,
                        batch_size=4, train_samples=8, eval_samples=4))
    return t._train.lower(t.state, t.xs, t.ys, np.int32(0), np.int32(0), t.key_data).as_text()


@pytest.mark.slow
@pytest.mark.parametrize(("precision", "wanted"), [("fp32", "HIGHEST"), ("tf32", "HIGH")])
def test_jax_train_step_matmuls_carry_the_case_precision(precision: str, wanted: str) -> None:
    """fp32 is true fp32: without an explicit precision XLA runs fp32 dots as TF32 on Ampere+ GPUs and
    as bf16 passes on TPUs. Every dot and convolution, forward and backward, carries it."""
    import re

    text = _lowered_train_step(precision)
    dots = [line for line in text.splitlines() if "stablehlo.dot_general" in line]
    convs = [line for line in text.splitlines() if "stablehlo.convolution" in line]
    assert len(dots) >= 4 and len(convs) >= 4          # 2 dense + 2 conv layers, with their gradients
    for line in dots:
        assert re.search(rf"precision = \[{wanted}, {wanted}\]", line), line
    for line in convs:
        assert f"precision_config = [#stablehlo<precision {wanted}>, #stablehlo<precision {wanted}>]" in line
