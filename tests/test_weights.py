"""Weights files: pickle-free .npz round trips for torch state_dicts and flax variable trees, and the
trained-weights cache of inference cases."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
from quick_compile import quick_xla_in_process  # noqa: F401  (the module fixture, used by name)

from xpubench.case import Case
from xpubench.errors import UserError
from xpubench.harness import weights
from xpubench.workloads import get_workload


def test_save_load_round_trip(tmp_path) -> None:
    arrays = {"a/kernel": np.arange(6, dtype=np.float32).reshape(2, 3), "steps": np.array(7, np.int64),
              "mask": np.array([True, False])}
    path = weights.save(tmp_path / "w.npz", arrays, {"framework": "test"})
    back, meta = weights.load(path)
    assert meta["framework"] == "test" and set(back) == set(arrays)
    for k, value in arrays.items():
        np.testing.assert_array_equal(back[k], value)
        assert back[k].dtype == value.dtype
    assert weights.digest(back) == weights.digest(arrays)
    assert weights.digest({**arrays, "steps": np.array(8, np.int64)}) != weights.digest(arrays)


def test_bf16_round_trip(tmp_path) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.array([1.5, -2.25, 3e-3], dtype=ml_dtypes.bfloat16)
    back, meta = weights.load(weights.save(tmp_path / "b.npz", {"w": a}))
    assert back["w"].dtype == a.dtype and meta["bf16"] == ["w"]
    np.testing.assert_array_equal(back["w"].astype(np.float32), a.astype(np.float32))


def test_refuses_pickles_and_foreign_files(tmp_path) -> None:
    with pytest.raises(ValueError, match="pickle"):
        weights.save(tmp_path / "o.npz", {"o": np.array([{"x": 1}], dtype=object)})
    evil = tmp_path / "evil.npz"
    np.savez(evil, w=np.array([object()], dtype=object))   # a pickled entry
    with pytest.raises(UserError, match="not a weights file"):
        weights.load(evil)
    plain = tmp_path / "plain.npz"
    np.savez(plain, w=np.zeros(2))
    with pytest.raises(UserError, match="__meta__"):
        weights.load(plain)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(UserError):
        weights.load(junk)
    with pytest.raises(UserError, match="does not exist"):
        weights.load(tmp_path / "missing.npz")


def _spec(name):
    spec = get_workload(name).spec
    return dataclasses.replace(spec, input_shape=(12,)) if spec.input_kind == "tokens" else spec


@pytest.mark.parametrize("name", ["imdb_lstm", "mnist_cnn"])
def test_torch_round_trip(name, tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from xpubench.backends.torch_.infer import load_state_arrays, state_arrays

    wl, spec = get_workload(name), _spec(name)
    torch.manual_seed(0)
    model = wl.models["torch"](spec).eval()
    path = weights.save(tmp_path / "t.npz", state_arrays(model), {"framework": "torch"})
    torch.manual_seed(1)
    fresh = wl.models["torch"](spec).eval()
    x = (torch.randint(0, spec.vocab_size, (5, *spec.input_shape)) if spec.input_kind == "tokens"
         else torch.rand(5, *spec.input_shape))
    with torch.no_grad():
        before = model(x)
        assert not torch.equal(before, fresh(x))
        load_state_arrays(fresh, weights.load(path)[0])
        assert torch.equal(before, fresh(x))


def _flax_bn_model():
    import flax.linen as nn

    class DenseBN(nn.Module):   # a batch_stats collection besides params, like the ResNet's
        @nn.compact
        def __call__(self, x, train=False):
            x = nn.Dense(8)(x)
            return nn.BatchNorm(use_running_average=not train)(x)

    return DenseBN()


@pytest.mark.slow
@pytest.mark.usefixtures("quick_xla_in_process")   # values round-trip exactly at any optimisation level
@pytest.mark.parametrize("name", ["imdb_lstm", "batchnorm"])
def test_flax_round_trip(name, tmp_path) -> None:
    jax = pytest.importorskip("jax")
    from xpubench.backends.jax_.infer import arrays_tree, tree_arrays

    rng = np.random.default_rng(0)
    if name == "batchnorm":
        model, x = _flax_bn_model(), rng.random((3, 4), np.float32)
    else:
        spec = _spec(name)
        model = get_workload(name).models["jax"](spec)
        x = rng.integers(0, spec.vocab_size, (3, *spec.input_shape)).astype(np.int32)
    init = jax.jit(model.init)   # one program (eagerly, the LSTM's every op is compiled on its own)
    variables = init(jax.random.key(0), x[:1])
    if name == "batchnorm":   # non-trivial running statistics
        _, updates = model.apply(variables, x * 5 + 1, train=True, mutable=["batch_stats"])
        variables = {**variables, **updates}
    path = weights.save(tmp_path / "j.npz", tree_arrays(variables), {"framework": "jax"})
    other = init(jax.random.key(1), x[:1])
    loaded = arrays_tree(weights.load(path)[0])
    assert set(loaded) == set(variables)
    apply = jax.jit(lambda v, x: model.apply(v, x, train=False))
    assert not np.array_equal(np.asarray(apply(other, x)), np.asarray(apply(variables, x)))
    np.testing.assert_array_equal(np.asarray(apply(loaded, x)), np.asarray(apply(variables, x)))


def _case(**kw):
    base = {"workload": "imdb_lstm", "backend": "torch", "device": "cpu", "mode": "infer",
            "precision": "int8", "batch_size": 8, "epochs": 1, "steps": 2, "seed": 3}
    return Case(**{**base, **kw})


def test_training_key_ignores_precision_and_where_to_save() -> None:
    base = weights.training_key(_case(), {"framework": "x"})
    assert weights.training_key(_case(precision="bf16", mode="train", eval_samples=5,
                                      options={"weights_dir": "/elsewhere"}), {"framework": "x"}) == base
    for changed in (_case(seed=4), _case(epochs=2), _case(backend="jax"), _case(batch_size=16)):
        assert weights.training_key(changed, {"framework": "x"}) != base
    assert weights.training_key(_case(), {"framework": "y"}) != base


def test_trained_weights_cache(tmp_path, monkeypatch) -> None:
    case = _case(options={"weights_dir": str(tmp_path)})
    calls = []

    def train():
        calls.append(1)
        return {"w": np.full(3, len(calls), np.float32)}

    first, info1 = weights.trained_weights(case, {"k": 1}, train, {"workload": "imdb_lstm"})
    second, info2 = weights.trained_weights(case, {"k": 1}, train, {"workload": "imdb_lstm"})
    assert len(calls) == 1 and info1["weights_source"] == "trained" and info2["weights_source"] == "cache"
    assert info1["weights_sha256"] == info2["weights_sha256"] and info2["train_s"] is None
    np.testing.assert_array_equal(first["w"], second["w"])
    assert list(tmp_path.glob("imdb_lstm-torch-s3-*.npz"))
    monkeypatch.setenv(weights.CACHE_ENV, "off")
    _, info3 = weights.trained_weights(_case(), {"k": 1}, train, {})
    assert info3["weights_source"] == "trained" and info3["weights_file"] is None and len(calls) == 2
