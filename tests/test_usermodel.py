"""Your own model (xpubench.usermodel): the parent's checks before anything runs (no import of the
user's file), the worker's checks (each one clear line as the case's error), and a small torch CNN, a
flax MLP and a Keras model, none of them built in, trained and run for inference through worker
processes with measured FLOPs.

The worker's cases run as launch/worker.py runs a case, in two worker processes (tests/batch_worker.py), one per
framework under Keras (Keras picks its backend at import: one Keras backend per process): the torch models'
cases and then, last, keras:torch's; the flax model's and then keras:jax's. Each is made at the first test
that asks and read by every other: a process start and one torch or JAX import, not one per case (what the
process boundary itself does is tests/test_runner_isolation.py's and tests/test_exit_codes.py's)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from batch_worker import ONE_THREAD, run_cases
from quick_compile import QUICK_XLA

from xpubench.case import Case
from xpubench.errors import UserError
from xpubench.usermodel.reference import parse_reference
from xpubench.usermodel.spec import model_input, workload_spec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"
BAD = Path(__file__).parent / "data" / "usermodels"


# --- the parent: before anything runs, without importing the file -----------------------------------

@pytest.mark.parametrize("ref, message", [
    ("nope/missing.py:make", "model file nope/missing.py does not exist (or is not a file)"),
    ("SYNTAX_ERROR:broken", "is not valid Python: invalid syntax (line 1)"),
    (f"{EXAMPLES}/torch_models.py:large_cnn",
     "defines no function 'large_cnn' at module level; functions defined there: small_cnn, tiny_mlp"),
    ("just_a_name", "--model must be FILE.py:FUNCTION or module:function, got 'just_a_name'"),
    (f"{EXAMPLES}/torch_models.py:not-a-name", "--model must be FILE.py:FUNCTION or module:function"),
    ("no_such_module_xyz:make", "model module no_such_module_xyz cannot be found"),
])
def test_bad_references_are_one_line_before_anything_runs(ref, message, tmp_path):
    broken = tmp_path / "syntax_error.py"
    broken.write_text("def broken(:\n    return 1\n")
    ref = ref.replace("SYNTAX_ERROR", str(broken))
    with pytest.raises(UserError) as err:
        parse_reference(ref)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_parent_never_imports_the_users_file(tmp_path):
    marker = tmp_path / "imported"
    model_file = tmp_path / "m.py"
    model_file.write_text(f"open({str(marker)!r}, 'w').close()\nimport torch\n\ndef make():\n    pass\n")
    ref = parse_reference(f"{model_file}:make")
    assert not marker.exists() and ref.frameworks == ("torch",) and len(ref.sha256) == 64


@pytest.mark.parametrize("values, message", [
    ({"input_shape": "28,x,1", "task": "classes:10"}, "input shape must be whole numbers above 0"),
    ({"input_shape": "28,0", "task": "classes:10"}, "input shape must be whole numbers above 0"),
    ({"input_shape": "28,28,1", "task": "classes:1"}, "at least 2 classes"),
    ({"input_shape": "28,28,1", "task": "segmentation"}, "unknown task 'segmentation'; give one of classes:N"),
    ({"input_shape": "28,28,1", "input_dtype": "float64", "task": "binary"}, "unknown input dtype 'float64'"),
    ({"task": "binary"}, "input shape missing"),
    ({"input_shape": "100", "input_dtype": "int32", "task": "binary"}, "give --vocab-size N"),
    ({"input_shape": "100", "input_dtype": "float32", "task": "tokens:256"}, "give an integer --input-dtype"),
])
def test_bad_shapes_dtypes_and_tasks_are_one_line(values, message):
    with pytest.raises(UserError, match=message):
        model_input(values)


def test_a_task_selects_the_data_and_the_loss():
    spec = workload_spec("m", model_input({"input_shape": "100", "input_dtype": "int32", "task": "tokens:256"}))
    assert (spec.input_kind, spec.target_kind, spec.loss, spec.vocab_size, spec.target_shape) == \
        ("tokens", "token_seq", "softmax_ce", 256, (100,))
    spec = workload_spec("m", model_input({"input_shape": [16], "task": "regression:3"}))
    assert (spec.input_kind, spec.loss, spec.metric, spec.target_shape) == ("series", "mse", "mse", (3,))


# --- the worker: one line as the case's error ---------------------------------------------------------

def _case(ref, mode="train", backend="auto", **options):
    name = ref.rpartition(":")[2]
    # inference measures until half its budget has gone: 0.5 s is enough for every assertion below
    return Case(workload=name, backend=backend, device="cpu", mode=mode, batch_size=32, epochs=2, steps=4,
                train_samples=256, eval_samples=64, time_budget_s=2 if mode == "train" else 0.5,
                options={"model": str(ref), "weights_dir": "off", **options})


def _process(case: Case) -> str:
    """The worker process a case runs in: JAX's (the flax model, then keras:jax) or torch's (the torch models,
    among them the one asked of -b jax, skipped before JAX is imported; then keras:torch). Keras, imported by
    a process's last cases, runs on that process's framework."""
    jax = case.backend == "keras:jax" or case.options["model"].startswith(f"{EXAMPLES}/flax_models.py:")
    return "flax and keras:jax" if jax else "torch and keras:torch"


def _key(case: Case) -> str:
    return json.dumps(case.as_dict(), sort_keys=True)


# the batch workers: one CPU thread per kernel library, and JAX programs (flax's, keras:jax's) compiled with XLA's
# backend optimisation level 0 (tests/quick_compile.py): the tests read what a case records, never its speed
WORKER_ENV = {**ONE_THREAD, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {QUICK_XLA}".strip()}


@pytest.fixture(scope="module")
def outcome_of():
    """outcome_of(case): the case's outcome as launch.supervise.run_one returns it; the first case asked of a
    process runs every case of CASES (below) that runs in that process."""
    done: dict[str, dict] = {}
    failed: dict[str, BaseException] = {}   # a process that failed fails every test that asks it, once

    def outcome(case: Case) -> dict:
        process = _process(case)
        if process in failed:
            raise failed[process]
        if _key(case) not in done:
            group = sorted((c for c in CASES if _process(c) == process), key=lambda c: c.backend.startswith("keras"))
            assert _key(case) in map(_key, group), "add the case to CASES"
            try:
                done.update(zip(map(_key, group), run_cases(group, timeout_s=1200, env=WORKER_ENV), strict=True))
            except BaseException as exc:
                failed[process] = exc
                raise
        return done[_key(case)]

    return outcome


WORKER_ERRORS = [
    ("not_a_model", "not_a_model() returned list, not a torch.nn.Module, a flax linen Module or a Keras 3 Model"),
    ("wrong_input", ("the model does not take input of shape (2, 7) (float32): RuntimeError: mat1 and mat2 "
                     "shapes cannot be multiplied (2x7 and 10x4)")),
    ("wrong_output", "the model's output has shape (2, 3) for 2 samples; task classes:4 needs (2, 4)"),
]


@pytest.mark.slow
@pytest.mark.parametrize("function, message", WORKER_ERRORS)
def test_what_only_the_worker_can_check_is_the_cases_one_line_error(function, message, outcome_of):
    outcome = outcome_of(_case(f"{BAD}/bad_models.py:{function}"))
    assert outcome["status"] == "error" and message in outcome["message"] and "\n" not in outcome["message"]


@pytest.mark.slow
def test_a_model_of_another_framework_than_the_backend_is_skipped_with_the_reason(outcome_of):
    """One case's mismatch (a file holding torch, flax and Keras models) never ends the run: skipped."""
    outcome = outcome_of(_case(f"{BAD}/bad_models.py:fine", backend="jax"))
    assert outcome["status"] == "skipped"
    assert outcome["message"].endswith("is a torch model: it runs with -b torch, not -b jax")


# --- outputs, vocabularies and FLOP counts that need care ----------------------------------------------

OUTPUTS = f"{BAD}/output_models.py"


TAKEN = [("tuple_output", "the first element of the output (tuple)"),
         ("dict_output", "['logits'] of the output (dict)")]


@pytest.mark.slow
@pytest.mark.parametrize("function, taken", TAKEN)
def test_logits_are_taken_from_a_tuple_or_a_dict_and_the_result_says_which(function, taken, outcome_of):
    outcome = outcome_of(_case(f"{OUTPUTS}:{function}", "infer"))
    assert outcome["status"] == "ok", outcome["message"]
    assert outcome["metrics"]["model_output"] == taken and outcome["metrics"]["predictions"] == 64


UNUSABLE = [
    ("no_logits", {}, ("the model's output is dict without 'logits' (keys: hidden), in which xpubench finds no "
                      "logits: return the logits as a tensor, or an object with .logits (a Hugging Face "
                      "ModelOutput), a dict with 'logits' or a tuple whose first element is the logits")),
    ("ids_without_vocabulary", {}, "integer inputs are token ids: give --vocab-size N"),
    ("token_bag", {"model_input": {"vocab_size": 1000}},
     ("vocab_size 1000 (from --vocab-size) is larger than the model's vocabulary, 500 (the rows of the model's "
     "first embedding (Embedding)): token ids from 500 up would be out of its range")),
]


@pytest.mark.slow
@pytest.mark.parametrize("function, options, message", UNUSABLE)
def test_outputs_and_vocabularies_xpubench_cannot_use_are_one_line_errors(function, options, message, outcome_of):
    outcome = outcome_of(_case(f"{OUTPUTS}:{function}", **options))
    assert outcome["status"] == "error" and message in outcome["message"] and "\n" not in outcome["message"]


@pytest.mark.slow
def test_the_vocabulary_of_token_ids_is_read_from_the_model(outcome_of):
    outcome = outcome_of(_case(f"{OUTPUTS}:token_bag", "infer"))
    m = outcome["metrics"]
    assert outcome["status"] == "ok", outcome["message"]
    assert (m["vocab_size"], m["vocab_size_source"]) == (500, "the rows of the model's first embedding (Embedding)")


@pytest.mark.slow
def test_a_model_ending_in_a_softmax_runs_with_a_warning(outcome_of):
    outcome = outcome_of(_case(f"{OUTPUTS}:ends_in_softmax"))
    m = outcome["metrics"]
    assert outcome["status"] == "ok", outcome["message"]
    assert m["model_warning"].startswith("the model's outputs are probabilities (each row sums to 1): it ends in a "
                                         "softmax, but the loss takes logits, so training stalls near ln(3) = 1.10")
    assert m["model_warning"] in m["warning"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["train", "infer"])
def test_a_flop_count_that_fails_leaves_the_flops_unknown_and_the_case_measured(mode, outcome_of):
    outcome = outcome_of(_case(f"{OUTPUTS}:counter_trouble", mode))
    m = outcome["metrics"]
    assert outcome["status"] == "ok", outcome["message"]
    assert m["flops_method"] == ("n/a (the FLOP count failed in output_models.py:forward: RuntimeError: this model "
                                 "refuses to be traced; the case is measured without it)")
    assert m["flops_per_sample"] is None and m["achieved_flops_per_s"] is None and m.get("mfu") is None
    assert m["samples_per_s"] > 0


# --- three models none of which is built in, trained and predicted in workers -------------------------

MODELS = [
    (f"{EXAMPLES}/torch_models.py:small_cnn", "auto", {}, "torch", 34_058, "torch FlopCounterMode"),
    (f"{EXAMPLES}/flax_models.py:mlp", "auto", {}, "flax", 269_322, "XLA cost analysis"),
    (f"{EXAMPLES}/keras_models.py:text_cnn", "keras:jax", {}, "keras", 363_201, "XLA cost analysis"),
    (f"{EXAMPLES}/keras_models.py:text_cnn", "keras:torch", {}, "keras", 363_201, "torch FlopCounterMode"),
    (f"{EXAMPLES}/torch_models.py:tiny_mlp", "torch",
     {"model_input": {"input_shape": [64], "task": "regression:3"}}, "torch", 8_707, "torch FlopCounterMode"),
]


@pytest.mark.slow
@pytest.mark.parametrize("ref, backend, options, framework, params, method", MODELS)
@pytest.mark.parametrize("mode", ["train", "infer"])
def test_user_models_train_and_predict_in_workers_with_measured_flops(ref, backend, options, framework, params,
                                                                      method, mode, outcome_of):
    outcome = outcome_of(_case(ref, mode, backend, **options))
    m = outcome["metrics"]
    assert outcome["status"] == "ok", outcome["message"]
    assert (m["model_framework"], m["model_params"], m["model_name"]) == (framework, params, ref.rpartition(":")[2])
    assert m["model_sha256"] == parse_reference(ref).sha256 and method in m["flops_method"]
    assert m["flops_per_sample"] > 0 and m["achieved_flops_per_s"] > 0 and outcome["placement"] == "cpu"
    if mode == "train":
        assert len(outcome["samples"]["step_s"]) >= 3 and m["final_loss"] > 0
    else:
        assert m["latency_s"] > 0 and m["predictions"] == 64


def test_flops_that_a_counter_would_miss_are_unknown_not_wrong():
    """FlopCounterMode sees 200 FLOPs in the built-in imdb_lstm (26.4M by formula): refused, not reported."""
    import torch

    from xpubench.usermodel.flops import torch_flops
    from xpubench.workloads import get_workload

    wl = get_workload("imdb_lstm")
    model = wl.models["torch"](wl.spec)
    flops, method = torch_flops(lambda: model(torch.zeros(1, 250, dtype=torch.long)), model)
    assert flops is None and method.startswith("n/a (torch FlopCounterMode does not count nn.LSTM")


@pytest.mark.slow
def test_measured_torch_flops_equal_the_formula_for_the_built_in_cnns():
    import torch

    from xpubench.usermodel.flops import torch_flops
    from xpubench.workloads import get_workload

    for name in ("mnist_cnn", "cifar10_resnet"):
        wl = get_workload(name)
        model = wl.models["torch"](wl.spec).eval()
        x = torch.zeros(1, *wl.spec.input_shape)
        assert torch_flops(lambda m=model, x=x: m(x), model)[0] == wl.forward_flops(wl.spec)


# every case the tests above ask of the worker, run together per process (outcome_of)
CASES = [
    *(_case(f"{BAD}/bad_models.py:{function}") for function, _ in WORKER_ERRORS),
    _case(f"{BAD}/bad_models.py:fine", backend="jax"),
    *(_case(f"{OUTPUTS}:{function}", "infer") for function, _ in TAKEN),
    *(_case(f"{OUTPUTS}:{function}", **options) for function, options, _ in UNUSABLE),
    _case(f"{OUTPUTS}:token_bag", "infer"),
    _case(f"{OUTPUTS}:ends_in_softmax"),
    *(_case(f"{OUTPUTS}:counter_trouble", mode) for mode in ("train", "infer")),
    *(_case(ref, mode, backend, **options) for ref, backend, options, *_ in MODELS for mode in ("train", "infer")),
]
