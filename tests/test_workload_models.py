"""The six model workloads build in both frameworks, agree on output shapes and trainable parameter
counts, and compute the same function (torch weights copied into the flax model give the same
outputs), which pins down layouts such as the LSTM/GRU gate order and the flatten order."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
pytest.importorskip("flax")

from quick_compile import QUICK_XLA_OPTIONS, quick_xla_in_process  # noqa: F401  (the module fixture)

from xpubench.workloads import get_workload, names
from xpubench.workloads.base import WorkloadSpec

# every JAX program here is compiled with XLA's optimisation mostly off (tests/quick_compile.py): the tests are
# about shapes, parameter counts and values, never a speed
pytestmark = pytest.mark.usefixtures("quick_xla_in_process")

BATCH = 2


def _mnist_cnn_params() -> int:
    conv1 = 64 * (2 * 2 * 1) + 64                  # 320
    conv2 = 32 * (2 * 2 * 64) + 32                 # 8,224
    fc1 = (7 * 7 * 32) * 256 + 256                 # 28 -> 14 -> 7 after two pools: 401,664
    fc2 = 256 * 10 + 10                            # 2,570
    return conv1 + conv2 + fc1 + fc2               # 412,778


def _resnet20_params() -> int:
    convs = 3 * 3 * 3 * 16                                  # stem
    convs += 6 * (3 * 3 * 16 * 16)                          # stage 1: 3 blocks x 2 convs
    convs += 3 * 3 * 16 * 32 + 5 * (3 * 3 * 32 * 32)        # stage 2
    convs += 3 * 3 * 32 * 64 + 5 * (3 * 3 * 64 * 64)        # stage 3 (no biases: BN follows)
    bn = 2 * (16 + 6 * 16 + 6 * 32 + 6 * 64)                # scale + shift per BN channel
    return convs + bn + 64 * 10 + 10                        # option-A shortcuts: no parameters


def _lstm(inputs: int, hidden: int) -> int:
    return 4 * hidden * (inputs + hidden) + 2 * 4 * hidden  # W_ih, W_hh, b_ih, b_hh


def _gru(inputs: int, hidden: int) -> int:
    return 3 * hidden * (inputs + hidden) + 2 * 3 * hidden


EXPECTED_PARAMS = {
    "mnist_cnn": _mnist_cnn_params(),
    "fashion_cnn": _mnist_cnn_params(),
    "cifar10_resnet": _resnet20_params(),
    "imdb_lstm": 15_000 * 32 + _lstm(32, 100) + 100 + 1,
    "shakespeare_lstm": 256 * 512 + _lstm(512, 512) + _lstm(512, 512) + 512 * 256 + 256,
    "weather_gru": _gru(20, 512) + 512 * 3 + 3,
}


def test_hand_counts() -> None:
    assert EXPECTED_PARAMS["mnist_cnn"] == 412_778
    assert EXPECTED_PARAMS["cifar10_resnet"] == 269_722
    assert EXPECTED_PARAMS["imdb_lstm"] == 533_701
    assert EXPECTED_PARAMS["shakespeare_lstm"] == 4_464_896
    assert EXPECTED_PARAMS["weather_gru"] == 821_763


def small_spec(name: str) -> WorkloadSpec:
    """The workload's spec, with the weather series shortened to 16 steps to keep tests fast."""
    spec = get_workload(name).spec
    if name == "weather_gru":
        spec = dataclasses.replace(spec, input_shape=(16, 20), target_shape=(16, 3))
    return spec


def sample_input(spec: WorkloadSpec, batch: int = BATCH, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if spec.input_kind == "tokens":
        return rng.integers(0, spec.vocab_size, (batch, *spec.input_shape), dtype=np.int32)
    return rng.random((batch, *spec.input_shape), dtype=np.float32)


def torch_param_count(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def jax_variables_shapes(model, spec: WorkloadSpec):
    x = sample_input(spec, batch=1)
    return jax.eval_shape(lambda: model.init(jax.random.key(0), x, train=False))


def jax_param_count(model, spec: WorkloadSpec) -> int:
    return sum(int(np.prod(a.shape)) for a in jax.tree.leaves(jax_variables_shapes(model, spec)["params"]))


@pytest.mark.parametrize("name", names("model"))
def test_parameter_counts_equal(name: str) -> None:
    wl = get_workload(name)
    torch_count = torch_param_count(wl.models["torch"](wl.spec))
    jax_count = jax_param_count(wl.models["jax"](wl.spec), wl.spec)
    assert torch_count == jax_count == EXPECTED_PARAMS[name]


def test_weather_gru_input_width_from_spec() -> None:
    wl = get_workload("weather_gru")
    spec = dataclasses.replace(wl.spec, input_shape=(16, 7), target_shape=(16, 3))
    expected = _gru(7, 512) + 512 * 3 + 3
    assert torch_param_count(wl.models["torch"](spec)) == jax_param_count(wl.models["jax"](spec), spec) == expected


def expected_output_shape(spec: WorkloadSpec) -> tuple[int, ...]:
    if spec.target_kind == "token_seq":
        return (BATCH, *spec.target_shape, spec.num_outputs)
    if spec.target_kind == "series":
        return (BATCH, *spec.target_shape)
    return (BATCH, spec.num_outputs)


# ---- torch weights -> flax variables -------------------------------------------------------------

def _flax_path(torch_name: str) -> list[str]:
    """'blocks.0.conv1' -> ['blocks_0', 'conv1'] (flax names submodules of a list '<name>_<i>')."""
    path: list[str] = []
    for part in torch_name.split("."):
        if part.isdigit():
            path[-1] = f"{path[-1]}_{part}"
        else:
            path.append(part)
    return path


def _put(tree: dict, path: list[str], leaves: dict) -> None:
    for key in path:
        tree = tree.setdefault(key, {})
    tree.update(leaves)


def torch_to_flax(model) -> dict:
    """Flax variables holding the torch model's weights (layouts as documented in the workloads)."""
    nn = torch.nn
    params: dict = {}
    stats: dict = {}

    def arr(t):
        return np.asarray(t.detach().numpy())

    for name, m in model.named_modules():
        path = _flax_path(name)
        if isinstance(m, nn.Conv2d):
            leaves = {"kernel": arr(m.weight.permute(2, 3, 1, 0))}
            if m.bias is not None:
                leaves["bias"] = arr(m.bias)
            _put(params, path, leaves)
        elif isinstance(m, nn.Linear):
            _put(params, path, {"kernel": arr(m.weight.T), "bias": arr(m.bias)})
        elif isinstance(m, nn.Embedding):
            _put(params, path, {"embedding": arr(m.weight)})
        elif isinstance(m, nn.BatchNorm2d):
            _put(params, path, {"scale": arr(m.weight), "bias": arr(m.bias)})
            _put(stats, path, {"mean": arr(m.running_mean), "var": arr(m.running_var)})
        elif isinstance(m, (nn.LSTM, nn.GRU)):
            for k in range(m.num_layers):
                cell = {
                    "input": {"kernel": arr(getattr(m, f"weight_ih_l{k}").T), "bias": arr(getattr(m, f"bias_ih_l{k}"))},
                    "hidden": {"kernel": arr(getattr(m, f"weight_hh_l{k}").T),
                               "bias": arr(getattr(m, f"bias_hh_l{k}"))},
                }
                _put(params, [*path[:-1], f"{path[-1]}_l{k}", "cell"], cell)
    return {"params": params, "batch_stats": stats} if stats else {"params": params}


@pytest.mark.slow
@pytest.mark.parametrize("name", names("model"))
def test_same_function_in_both_frameworks(name: str) -> None:
    """Shapes agree, and with the same weights (eval mode) the outputs agree to float32 rounding."""
    wl = get_workload(name)
    spec = small_spec(name)
    torch.manual_seed(0)
    tmodel = wl.models["torch"](spec).eval()
    if spec.input_kind == "image":
        tmodel = tmodel.to(memory_format=torch.channels_last)  # what the torch backend does
    jmodel = wl.models["jax"](spec)
    x = sample_input(spec)

    variables = torch_to_flax(tmodel)
    init_shapes = jax_variables_shapes(jmodel, spec)
    assert jax.tree.structure(variables) == jax.tree.structure(init_shapes)
    assert [a.shape for a in jax.tree.leaves(variables)] == [a.shape for a in jax.tree.leaves(init_shapes)]

    with torch.no_grad():
        t_out = tmodel(torch.from_numpy(x)).numpy()
    j_out = np.asarray(jax.jit(lambda v, x: jmodel.apply(v, x, train=False))(variables, x))
    assert t_out.shape == j_out.shape == expected_output_shape(spec)
    np.testing.assert_allclose(j_out, t_out, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mnist_cnn", "cifar10_resnet"])
def test_jax_train_mode(name: str) -> None:
    """train=True draws dropout from the "dropout" rng and updates BN's "batch_stats"."""
    wl = get_workload(name)
    spec = wl.spec
    model = wl.models["jax"](spec)
    x = sample_input(spec)
    # the variables' shapes traced, not the init compiled (3.2 s of CPU for the ResNet, 1.1 s for the CNN); their
    # values drawn here: weights at random, BatchNorm's running statistics as flax starts them (mean 0, variance 1)
    shapes = jax.eval_shape(lambda x: model.init({"params": jax.random.key(0), "dropout": jax.random.key(1)}, x,
                                                 train=False), x)
    rng = np.random.default_rng(0)

    def start(path, leaf):
        if path[0].key == "batch_stats":
            return np.full(leaf.shape, 1.0 if path[-1].key == "var" else 0.0, leaf.dtype)
        return rng.normal(0.0, 0.1, leaf.shape).astype(leaf.dtype)

    variables = jax.tree_util.tree_map_with_path(start, shapes)
    mutable = [k for k in variables if k != "params"]
    # jitted: one program (eagerly, every op of the ResNet compiles on its own), compiled quickly: the test is about
    # which collections change, not speed
    train = jax.jit(lambda v, x: model.apply(v, x, train=True, rngs={"dropout": jax.random.key(2)}, mutable=mutable))
    out, updates = train.lower(variables, x).compile(QUICK_XLA_OPTIONS)(variables, x)
    assert out.shape == (BATCH, spec.num_outputs)
    assert set(updates) == set(mutable)
    if mutable:  # running statistics moved towards the batch's
        before, after = jax.tree.leaves(variables["batch_stats"]), jax.tree.leaves(updates["batch_stats"])
        assert any(not np.allclose(a, b) for a, b in zip(before, after))


@pytest.mark.slow   # 0.9-1.5 s each: eager JAX compiles every op of both pools and their gradients
@pytest.mark.parametrize("shape", [(3, 28, 28, 4), (2, 7, 9, 3)])
def test_jax_max_pool_2x2_is_flax_max_pool(shape) -> None:
    """The reshape form used for speed on the CPU: same values and gradients as flax's reduce_window
    max pool, odd sizes included (valid pooling drops the trailing row/column)."""
    flax_nn = pytest.importorskip("flax.linen")
    import jax

    from xpubench.workloads.mnist_cnn import max_pool_2x2

    x = jax.numpy.asarray(np.random.default_rng(0).normal(size=shape).astype(np.float32))  # no ties

    def reference(v):
        return flax_nn.max_pool(v, (2, 2), strides=(2, 2))

    np.testing.assert_array_equal(np.asarray(max_pool_2x2(x)), np.asarray(reference(x)))
    weights = jax.numpy.arange(reference(x).size, dtype=np.float32).reshape(reference(x).shape)
    grad, grad_ref = (jax.grad(lambda v, f=f: (f(v) * weights).sum())(x) for f in (max_pool_2x2, reference))
    np.testing.assert_array_equal(np.asarray(grad), np.asarray(grad_ref))
