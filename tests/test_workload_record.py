"""One record per workload (workloads/base.py ``Workload``): every registered module exports one that
declares what the rest of xpubench reads; the record is frozen with slots (an undeclared attribute can be
neither read nor set); no code outside workloads/ reads a workload's attribute with getattr; the planner
plans a (workload, backend) pair only where the workload has a model for the backend's family, and only
the modes it declares."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import sys
from pathlib import Path

import pytest
from source_trees import file_nodes

from xpubench import workloads
from xpubench.backends import supports
from xpubench.case import Case
from xpubench.errors import UserError
from xpubench.plan import PlanRequest, build_cases
from xpubench.plan.estimate import case_seconds
from xpubench.workloads.base import Workload, WorkloadOption

SRC = Path(__file__).resolve().parents[1] / "src" / "xpubench"
CPU = [{"id": "cpu", "kind": "cpu"}]

# a workload in the new shape, written by someone who has a torch model only (no Keras, no flax)
TINY = '''
from xpubench.workloads.base import Workload, WorkloadSpec

SPEC = WorkloadSpec(name="tiny_dense", title="a dense layer", dataset="mnist", input_shape=(28, 28, 1),
                    input_kind="image", target_kind="class", num_outputs=10, loss="softmax_ce", metric="accuracy",
                    optimizer="adam", learning_rate=1e-3, batch_sizes=(32,), quick_batch_size=32, epochs=1,
                    train_samples=256, eval_samples=64)


def build_torch(spec):
    import torch

    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, spec.num_outputs))


WORKLOAD = Workload(name="tiny_dense", title=SPEC.title, kind="model", sources=(__file__,), spec=SPEC,
                    models={"torch": build_torch}, forward_flops=lambda spec: 2 * 784 * spec.num_outputs,
                    modes=("train",))
'''


def _env() -> dict:
    """A CPU machine with numpy, torch, jax and Keras 3 on jax and torch (nothing is run)."""
    backends = {name: {"installed": True, "version": "1", "devices": list(CPU)} for name in ("numpy", "torch", "jax")}
    backends["keras"] = {"installed": True, "version": "3.15.1", "devices": [], "keras_backends": ["jax", "torch"]}
    return {"host": {"cpu": {"usable_cores": 2, "peak_estimate": {"fp32": {"value": 1e11}}}}, "backends": backends,
            "variables": {}}


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """The TINY workload registered as "tiny_dense" (one line in workloads.REGISTRY, as a new one is)."""
    (tmp_path / "tiny_dense_workload.py").write_text(TINY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(workloads.REGISTRY, "tiny_dense", "tiny_dense_workload")
    yield workloads.get_workload("tiny_dense")
    sys.modules.pop("tiny_dense_workload", None)


def test_every_registered_module_exports_its_record():
    for name, module in workloads.REGISTRY.items():
        record = importlib.import_module(module).WORKLOAD
        assert isinstance(record, Workload) and record.name == name and workloads.get_workload(name) is record
        assert record.sources and all(Path(f).is_file() for f in record.sources), name
        package = Path(importlib.import_module(module).__file__).parent
        if package.name == name:   # a workload of its own package: its code digest covers every module of it
            assert {str(p) for p in package.glob("*.py")} <= set(record.sources), name
        assert set(record.models) <= {"torch", "jax", "keras"}, name
        assert (record.spec is None) == (not record.models), name   # a model has a spec, and the reverse
        if record.spec is not None:
            assert record.spec.name == name and record.forward_flops(record.spec) > 0, name
        pinned = {"weights_id"} if record.pin_options else set()   # what the plan pins (llama's checkpoint id)
        assert set(record.key_options) <= {row.key for row in record.options} | {"behaviour"} | pinned, name


def test_the_record_declares_every_attribute_and_is_read_only():
    record = workloads.get_workload("gpt")
    with pytest.raises(AttributeError):
        record.GENERATIVE   # noqa: B018 - the old implicit attribute: no longer there to be found
    with pytest.raises(AttributeError):
        getattr(record, "BACKENDS")   # noqa: B009
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.generates = False
    with pytest.raises((AttributeError, TypeError)):   # slots: no attribute outside the declared fields
        object.__setattr__(record, "run_me", print)
    with pytest.raises(TypeError):
        record.models["keras"] = record.models["torch"]
    with pytest.raises(TypeError, match="unexpected keyword"):
        Workload(name="x", title="x", kind="model", sources=(), generative=True)
    with pytest.raises(ValueError, match="kind"):
        Workload(name="x", title="x", kind="transformers", sources=())


def _getattr_on_a_workload(path: Path, root: Path = SRC.parent) -> list[str]:
    """``getattr(X, ...)`` calls whose X names a workload (get_workload(...), a workload or its module)."""
    found = []
    for node in file_nodes(path):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" and node.args:
            target = ast.unparse(node.args[0])
            if "workload" in target.lower() or target in ("mod", "module"):
                found.append(f"{path.relative_to(root)}:{node.lineno}: getattr({target}, ...)")
    return found


def test_no_code_outside_workloads_reads_a_workload_attribute_with_getattr():
    found = [hit for path in sorted(SRC.rglob("*.py")) if "workloads" not in path.parts
             for hit in _getattr_on_a_workload(path)]
    assert not found, "declare it on workloads.base.Workload instead:\n" + "\n".join(found)


def test_the_getattr_check_finds_one(tmp_path):
    (tmp_path / "dispatch.py").write_text("own = getattr(get_workload(case.workload), 'run', None)\n"
                                          "spec = getattr(trainer, 'spec', None)\n")
    assert _getattr_on_a_workload(tmp_path / "dispatch.py", tmp_path) == [
        "dispatch.py:1: getattr(get_workload(case.workload), ...)"]


def test_a_workload_without_a_keras_model_gets_no_keras_case(tiny):
    assert supports("torch", tiny) and not supports("keras:jax", tiny) and not supports("jax", tiny)
    cases = build_cases(PlanRequest(workloads=["tiny_dense", "mnist_cnn"], backends=["torch", "jax", "keras"],
                                    modes=["train", "infer"]), _env())
    planned = {(c.workload, c.backend, c.mode) for c in cases}
    assert {(b, m) for w, b, m in planned if w == "tiny_dense"} == {("torch", "train")}   # its model, its mode
    assert {b for w, b, _ in planned if w == "mnist_cnn"} == {"torch", "jax", "keras:jax", "keras:torch"}


def test_a_workload_that_no_chosen_backend_builds_is_an_empty_sweep(tiny):
    with pytest.raises(UserError, match="the sweep is empty"):
        build_cases(PlanRequest(workloads=["tiny_dense"], backends=["jax"]), _env())


def test_a_workload_option_row_is_checked_by_its_declaration():
    row = WorkloadOption("beams", "beam width", flag="--beams", least=2)
    row.check(3)
    with pytest.raises(UserError, match="--beams must be a whole number of at least 2, got 1"):
        row.check(1)
    with pytest.raises(UserError, match="gpt: n_layer must be a positive integer"):   # gpt's own check first
        build_cases(PlanRequest(workloads=["matmul"], backends=["numpy"], options={"n_layer": 0}), _env())


def test_the_estimate_uses_the_spec_the_case_options_configure():
    """A gpt case with preset gpt2 is estimated with gpt2's FLOPs, not the default preset's."""
    case = Case(workload="gpt", backend="torch", device="cpu", mode="train", batch_size=8, epochs=1, steps=2,
                train_samples=64, eval_samples=8, compile="off", key_options=("preset",))
    small, known = case_seconds(case, _env())
    large, _ = case_seconds(dataclasses.replace(case, options={"preset": "gpt2"}), _env())
    assert known and large > 10 * small
