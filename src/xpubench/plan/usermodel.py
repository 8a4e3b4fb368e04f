"""The plan of a user's model (``--model FILE.py:FUNCTION``, ``PlanRequest.model``): checked in the parent
before anything runs, without importing the user's file (usermodel/reference.py), then expanded by
plan.build_cases like a built-in workload (precisions, batch sizes, devices, device counts, time budget,
resume).

- **workload**: the function's name; a name that is also a built-in workload's is refused (one line),
  so a result's workload never means two things.
- **backends**: ``-b`` when given (``-b keras`` is every installed Keras backend); else the framework the
  function reaches (reference.function_frameworks: the imports its code uses, through the module-level
  definitions it uses; else the file's when it imports one only): ``torch`` -> torch, ``flax``/``jax``
  -> jax, ``keras`` -> every installed Keras backend (a Keras model runs on each; keras:jax only when
  the function reaches jax too, keras:torch when torch); else ``auto``: the worker runs it on the
  framework of the object the function returns. So a file of torch, flax and Keras models plans each
  function on its own framework; a case whose backend is not the model's is skipped in the worker.
- **modes**: train unless ``--mode`` says otherwise (``--mode train,infer`` for both).
- **options**: ``{"model": the reference as written, "model_input": {the given input_shape,
  input_dtype, task, vocab_size}, "model_sha256": the file's digest, "model_file": a file's absolute
  path}``; the worker imports ``model_file`` (so ``--resume`` works from any folder, runfile.check_models
  refusing a file whose digest changed); its values given here win over the keys of the dict FUNCTION returns.
- **checkpoints** (``--weights DIR``): pinned the same way, by the folder's absolute path and the digest
  of its config and safetensors headers (the workload's ``pin_options``, called by plan/resolve.py).
- **identity**: ``Case.key`` carries the file as written (``my_models.py``), so two models with the same
  function name in different files are two cases; an edited file keeps its key (compare a model before
  and after a change) while ``run_id`` and every result's ``model_sha256`` tell the versions apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from xpubench import backends
from xpubench.errors import UserError
from xpubench.plan.defaults import _backend_installed, device_backend, expand_backends
from xpubench.usermodel.reference import FRAMEWORK_IMPORTS, ModelRef, parse_reference
from xpubench.usermodel.spec import RUN_LENGTHS, parse_dtype, parse_shape, parse_task, parse_vocab_size
from xpubench.workloads import REGISTRY
from xpubench.workloads.base import Workload

AUTO = "auto"   # the worker resolves it to the returned model's framework (usermodel/load.py prepare)
PLANNED_SPEC = SimpleNamespace(**RUN_LENGTHS)   # what the plan reads of a spec, for a model it never imports


@dataclass
class ModelPlan:
    workload: str                          # the function's name
    backends: dict[str, str]               # backend id -> the backend whose devices it runs on
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def record(self) -> Workload:
        """The workload as the plan sees it: the default spec's batch, epochs and modes (the model itself is
        imported, and registered as a workload, in the worker: usermodel/load.py)."""
        return Workload(name=self.workload, title=f"your model {self.workload}", kind="user", sources=(),
                        spec=PLANNED_SPEC, in_default_run=False)


def model_plan(req, env: dict) -> ModelPlan:
    """The checked plan of ``req.model`` (a PlanRequest whose backends plan.build_cases has expanded)."""
    if not isinstance(req.model, str) or not req.model.strip():
        raise UserError(f"--model must be FILE.py:FUNCTION or module:function, got {req.model!r}")
    ref = parse_reference(req.model.strip())
    if ref.function in REGISTRY:
        raise UserError(f"model function {ref.function!r} has the name of a built-in workload: rename the "
                        f"function (the results would mix your model with xpubench's {ref.function})")
    if req.data == "real":
        raise UserError("--data real does not apply to --model: your model runs on synthetic data of its "
                        "input shape (docs/your-model.md)")
    given = model_input_options(req)
    backends = list(req.backends or _backends_of_imports(env, ref))
    options = {"model": req.model.strip(), **({"model_input": given} if given else {}), "model_sha256": ref.sha256}
    if ref.module is None:   # a file: its absolute path, so --resume works from anywhere
        options["model_file"] = str(ref.path)
    return ModelPlan(ref.function, {b: _device_source(env, b) for b in backends}, options)


def model_input_options(req) -> dict[str, Any]:
    """The input shape, dtype and task given with the request, checked (the rest may come from the dict
    FUNCTION returns, known only in the worker), as JSON-friendly case options."""
    given: dict[str, Any] = {}
    if req.input_shape is not None:
        given["input_shape"] = list(parse_shape(req.input_shape))
    if req.input_dtype is not None:
        given["input_dtype"] = parse_dtype(req.input_dtype)
    if req.task is not None:
        parse_task(req.task)
        given["task"] = str(req.task).strip()
    if req.vocab_size is not None:
        given["vocab_size"] = parse_vocab_size(req.vocab_size)
    return given


def _backends_of_imports(env: dict, ref: ModelRef) -> list[str]:
    """The backends the function reaches (``ModelRef.frameworks``), else ["auto"]."""
    found = set(ref.frameworks)
    for layered in sorted(b for b in found if backends.known(b) and backends.get(b).variants):   # keras
        narrowed = [f"{layered}:{b}" for b in backends.get(layered).variants
                    if b in found and _backend_installed(env, f"{layered}:{b}")]
        return narrowed if len(narrowed) == 1 else expand_backends(env, [layered])
    if len(found) == 1:
        return list(found)
    return [AUTO]   # none or several (torch and jax): the returned object decides


def _device_source(env: dict, backend: str) -> str:
    """The backend whose device records a case's devices are resolved against."""
    if backend != AUTO:
        return device_backend(backend)
    natives = [b for b in dict.fromkeys(FRAMEWORK_IMPORTS.values()) if not backends.get(b).variants]
    for native in natives:   # torch, jax: the frameworks a user's model is recognised as, not layered ones
        if _backend_installed(env, native):
            return native
    raise UserError("a model needs torch, jax (flax) or keras installed: pip install 'xpubench[torch]'")
