"""Your own model in the plan (plan/usermodel.py): its cases, backends, identity and the bad input refused
before anything runs; -b keras in the plan; xpubench.bench; the report's Framework comparison."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest
from conftest import this_machine

from xpubench import api
from xpubench.api.bench import bench, model_reference
from xpubench.errors import UserError
from xpubench.plan import PlanRequest, build_cases
from xpubench.report.tables.frameworks import comparison_table, layered_comparison, layered_table

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"
BAD = Path(__file__).parent / "data" / "usermodels" / "bad_models.py"
CPU = [{"id": "cpu", "kind": "cpu"}]


def _env(keras: bool = True, keras_backends=("jax", "torch")) -> dict:
    """A CPU machine with numpy, torch, jax and (optionally) Keras 3."""
    backends = {name: {"installed": True, "version": "1", "devices": list(CPU)} for name in ("numpy", "torch", "jax")}
    backends["keras"] = {"installed": keras, "version": "3.15.1" if keras else None, "devices": [],
                         "keras_backends": list(keras_backends)}
    return {"host": {"cpu": {"usable_cores": 2}}, "backends": backends, "variables": {}}


def _cases(**fields):
    return build_cases(PlanRequest(**fields), _env())


# --- the model's cases ------------------------------------------------------------------------------

@pytest.mark.parametrize("ref, backends", [
    (f"{EXAMPLES}/torch_models.py:small_cnn", ["torch"]),
    (f"{EXAMPLES}/flax_models.py:mlp", ["jax"]),
    (f"{EXAMPLES}/keras_models.py:text_cnn", ["keras:jax", "keras:torch"]),   # a Keras model runs on each
])
def test_the_backend_is_the_framework_the_file_imports(ref, backends):
    cases = _cases(model=ref)
    assert [c.backend for c in cases] == backends
    function = ref.rpartition(":")[2]
    assert {c.workload for c in cases} == {function}
    assert {c.mode for c in cases} == {"train"}                     # train unless --mode says otherwise
    source = Path(ref.rpartition(":")[0])   # the file resolved and its digest, for --resume from anywhere
    assert all(c.options == {"model": ref, "model_file": str(source.resolve()),
                             "model_sha256": hashlib.sha256(source.read_bytes()).hexdigest()} for c in cases)
    assert all(c.key.endswith(ref.rpartition(":")[0]) for c in cases)


def test_backend_flag_modes_precisions_batches_and_input_options():
    cases = _cases(model=f"{EXAMPLES}/torch_models.py:tiny_mlp", backends=["torch"], modes=["train", "infer"],
                   batch_sizes=[64, 16], precisions=["fp32", "bf16"], input_shape="64", input_dtype="float32",
                   task="classes:4", time_budget_s=5.0)
    assert sorted((c.mode, c.precision, c.batch_size) for c in cases) == sorted(
        (m, p, b) for m in ("train", "infer") for p in ("fp32", "bf16") for b in (16, 64))
    assert all(c.options["model_input"] == {"input_shape": [64], "input_dtype": "float32", "task": "classes:4"}
               for c in cases)
    assert {c.time_budget_s for c in cases} == {5.0}


def test_quick_gives_a_few_steps_and_no_import_of_the_file(tmp_path):
    exploding = tmp_path / "exploding.py"
    exploding.write_text("import torch\nraise SystemExit('imported!')\ndef make():\n    return None\n")
    cases = _cases(model=f"{exploding}:make", quick=True)     # the parent never imports the user's file
    assert [(c.backend, c.batch_size, c.epochs, c.steps, c.train_samples) for c in cases] == [
        ("torch", 32, 3, 2, 64)]


def test_a_file_that_imports_no_framework_is_resolved_in_the_worker(tmp_path):
    helper = tmp_path / "indirect.py"
    helper.write_text("from my_helpers import build\ndef make():\n    return build()\n")
    assert [c.backend for c in _cases(model=f"{helper}:make")] == ["auto"]


MIXED = Path(__file__).parent / "data" / "usermodels" / "mixed_models.py"


@pytest.mark.parametrize("function, backends", [
    ("torch_mlp", ["torch"]),                          # through the module-level class it builds
    ("flax_mlp", ["jax"]),
    ("keras_mlp", ["keras:jax", "keras:torch"]),       # a pure Keras model runs on every Keras backend
    ("local_import", ["torch"]),                       # an import inside the function
    ("plain_python", ["auto"]),                        # reaches none of the file's three: the worker decides
])
def test_a_file_of_several_frameworks_plans_each_function_on_its_own(function, backends):
    assert [c.backend for c in _cases(model=f"{MIXED}:{function}")] == backends


def test_vocab_size_reaches_the_worker_and_is_checked_before_anything_runs():
    cases = _cases(model=f"{EXAMPLES}/torch_models.py:tiny_mlp", input_dtype="int32", vocab_size=30522)
    assert all(c.options["model_input"] == {"input_dtype": "int32", "vocab_size": 30522} for c in cases)
    with pytest.raises(UserError, match="vocab_size must be a whole number above 0, got 0"):
        _cases(model=f"{EXAMPLES}/torch_models.py:tiny_mlp", vocab_size=0)
    with pytest.raises(UserError, match="--vocab-size describes the input of --model"):
        _cases(workloads=["mnist_cnn"], vocab_size=100)


def test_two_models_with_one_function_name_are_two_cases(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "models.py").write_text("import torch\ndef net():\n    return None\n")
    a, b = (_cases(model=f"{tmp_path / f}/models.py:net")[0] for f in ("a", "b"))
    assert a.workload == b.workload == "net"
    assert a.key != b.key and a.run_id != b.run_id


def test_model_and_builtin_workloads_together():
    cases = _cases(model=f"{EXAMPLES}/torch_models.py:tiny_mlp", workloads=["mnist_cnn"], backends=["torch"],
                   batch_sizes=[32])
    assert sorted(c.workload for c in cases) == ["mnist_cnn", "tiny_mlp"]
    assert "model" not in next(c for c in cases if c.workload == "mnist_cnn").options


# --- bad input: one line before anything runs --------------------------------------------------------

@pytest.mark.parametrize("model, fields, message", [
    ("nope/missing.py:make", {}, "model file nope/missing.py does not exist"),
    ("SYNTAX:broken", {}, "is not valid Python: invalid syntax (line 1)"),
    (f"{EXAMPLES}/torch_models.py:large_cnn", {}, "defines no function 'large_cnn' at module level"),
    ("CLASH:mnist_cnn", {}, "model function 'mnist_cnn' has the name of a built-in workload"),
    (f"{EXAMPLES}/torch_models.py:tiny_mlp", {"input_shape": "28,x"}, "input shape must be whole numbers"),
    (f"{EXAMPLES}/torch_models.py:tiny_mlp", {"task": "classes"}, "unknown task 'classes'"),
    (f"{EXAMPLES}/torch_models.py:tiny_mlp", {"input_dtype": "float64"}, "unknown input dtype 'float64'"),
    (f"{EXAMPLES}/torch_models.py:tiny_mlp", {"data": "real"}, "--data real does not apply to --model"),
])
def test_bad_model_input_is_one_line_from_the_plan(model, fields, message, tmp_path):
    (tmp_path / "syntax.py").write_text("def broken(:\n    pass\n")
    (tmp_path / "clash.py").write_text("import torch\ndef mnist_cnn():\n    return None\n")
    model = model.replace("SYNTAX", str(tmp_path / "syntax.py")).replace("CLASH", str(tmp_path / "clash.py"))
    with pytest.raises(UserError) as err:
        api.plan(PlanRequest(model=model, **fields), environment=_env())
    assert message in str(err.value)
    assert "\n" not in str(err.value)


# --- Keras in the plan -------------------------------------------------------------------------------

def test_keras_is_every_installed_keras_backend_and_not_in_the_default_run():
    cases = _cases(backends=["keras"], workloads=["mnist_cnn"])
    assert [c.backend for c in cases] == ["keras:jax"] * 3 + ["keras:torch"] * 3   # the spec's 3 batch sizes
    assert not any(c.backend.startswith("keras") for c in _cases(workloads=["mnist_cnn"]))
    no_jax = _env()
    no_jax["backends"]["jax"] = {"installed": False, "version": None, "devices": []}
    only_torch = build_cases(PlanRequest(backends=["keras"], workloads=["mnist_cnn"], batch_sizes=[32]), no_jax)
    assert [c.backend for c in only_torch] == ["keras:torch"]
    named = _cases(backends=["keras:torch", "jax"], workloads=["mnist_cnn"], batch_sizes=[32])
    assert [c.backend for c in named] == ["keras:torch", "jax"]


def test_keras_missing_is_one_line():
    with pytest.raises(UserError, match="backend 'keras' needs Keras 3"):
        build_cases(PlanRequest(backends=["keras"], workloads=["mnist_cnn"]), _env(keras=False))
    with pytest.raises(UserError, match="'keras:tensorflow' is not installed"):
        _cases(backends=["keras:tensorflow"], workloads=["mnist_cnn"])


def test_list_shows_keras(capsys):
    from xpubench.cli import main  # in this process: what `xpubench list` prints, not how it exits

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "keras:jax" in out and "keras:torch" in out


# --- xpubench.bench ----------------------------------------------------------------------------------

def test_bench_references():
    assert model_reference("my.py:net") == "my.py:net"
    with pytest.raises(UserError, match="can't be rebuilt in a worker process"):
        model_reference(lambda: None)
    weights = [1.0, 2.0]

    def closure():
        return weights
    with pytest.raises(UserError, match="closes over local variables weights"):
        model_reference(closure)
    with pytest.raises(UserError, match="bench's model is"):
        model_reference(42)


def test_bench_refuses_resume_and_a_second_model():
    with pytest.raises(UserError, match="to resume one"):
        bench("x.py:f", resume="a.jsonl")
    with pytest.raises(UserError, match="drop model="):
        bench("x.py:f", model="y.py:g")


def make_tiny():     # module level: isolate() rebuilds it from its source in a worker
    import torch
    return {"model": torch.nn.Linear(8, 3), "input_shape": (8,), "task": "classes:3"}


# the runs below take this machine's environment as detected once per test run (conftest), not again, and
# their workers run one CPU thread per kernel library (they check what is recorded, not how fast)

@pytest.mark.slow
def test_bench_a_function_returns_the_frame(tmp_path, one_thread_workers):
    df = bench(make_tiny, modes=["train", "infer"], quick=True, processes=1, output=tmp_path / "b.jsonl",
               environment=this_machine())
    assert sorted(df["mode"]) == ["infer", "train"]
    assert set(df["status"]) == {"ok"} and set(df["workload"]) == {"make_tiny"}
    assert set(df["model_params"]) == {8 * 3 + 3}


@pytest.mark.slow
def test_not_a_model_is_that_cases_error(tmp_path, one_thread_workers):
    """A model the worker refuses is that case's error in api.run's results (the worker's messages, a
    model that rejects its input among them: tests/test_usermodel.py)."""
    (result,) = api.run(PlanRequest(model=f"{BAD}:not_a_model", input_shape="4", task="binary", quick=True),
                        output=tmp_path / "r.jsonl", processes=1, environment=this_machine())
    assert result.status == "error" and "not_a_model() returned list" in result.message


# --- the report's Framework comparison ---------------------------------------------------------------

def _row(backend, samples, mode="train", noisy=False):
    return {"source": "a", "workload": "mnist_cnn", "device": "cpu", "mode": mode, "precision": "fp32",
            "batch_size": 32, "size": float("nan"), "devices": 1, "status": "ok", "backend": backend,
            "samples_per_s": samples, "noisy": noisy}


def test_keras_beside_native_jax_and_torch():
    frame = pd.DataFrame([_row("jax", 3000.0), _row("torch", None), _row("keras:jax", 1000.0, noisy=True),
                          _row("keras:torch", 750.0), _row("keras:torch", 500.0, mode="infer")])
    table = layered_comparison(frame).set_index(["on_top", "mode"])
    assert table.loc[("keras:jax", "train"), "jax_over"] == pytest.approx(3.0)
    assert pd.isna(table.loc[("keras:torch", "train"), "torch_over"])   # torch's figure missing: n/a
    assert ("keras:torch", "infer") not in table.index             # no native inference case beside it
    shown = comparison_table(layered_comparison(frame))
    shown = shown.set_index(["keras", "case"])
    assert shown.loc[("keras:torch", "train fp32 batch 32"), "torch / keras"] == "n/a"
    assert list(shown["jax / keras"]) == ["3.00x", "4.00x"]
    assert shown.loc[("keras:jax", "train fp32 batch 32"), "keras samples/s"] == "1,000 !"   # noisy
    assert not layered_table(frame).empty
    assert layered_table(frame[~frame["backend"].str.startswith("keras")]).empty


def test_a_dry_run_estimate_of_a_model_says_its_work_is_unknown():
    from xpubench.plan.estimate import case_seconds

    train, infer = _cases(model=f"{EXAMPLES}/torch_models.py:small_cnn", modes=["train", "infer"])
    seconds, known = case_seconds(train, _env())   # the parent never imports the model: no FLOPs here
    assert seconds > 0 and not known
    assert case_seconds(infer, _env())[1]           # inference is bounded by its budget
