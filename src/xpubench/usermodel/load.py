"""In the worker: a user's model imported, called, recognised, checked and registered as a workload, so
that the backends' own trainers and inference sessions run it (``get_workload(case.workload)``: a
``Workload`` record with the model as its only model, under its framework's family).

The case carries ``options["model"]`` (the reference, see reference.py) and, when given as options,
``options["model_input"]`` (plan/usermodel.model_input_options: input_shape, input_dtype, task,
vocab_size); values given as options win over the keys of a dict the function returns. Token-id
inputs without a vocabulary from either take the model's own (outputs.model_vocabulary).

Framework detection looks only at frameworks the user's file has imported already (``sys.modules``),
in this order: Keras 3 (a Keras model is also a torch.nn.Module on Keras's torch backend), torch, flax
linen. A model of another framework than the case's backend is skipped with the reason (``Unsupported``):
the plan runs a function on its own framework, so such a case is one of a file's other frameworks.
What only this process can find out is a ``UserError`` (one line; the case's error): the return value is
not a model, the model rejects the input (its own message, from one forward pass of two synthetic
samples), its output holds no logits (outputs.pick_logits) or they do not fit the task. One forward pass
also tells which part of the output is the logits (``model_output``) and whether they look like a
softmax's probabilities (a warning). A FLOP count that fails leaves the FLOPs n/a with its reason
(flops.count_failed); the case is measured all the same.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xpubench.backends.base import Unsupported
from xpubench.errors import UserError
from xpubench.usermodel import flops
from xpubench.usermodel.adapters import ADAPTERS
from xpubench.usermodel.outputs import (
    OUTPUT_FORMS,
    model_vocabulary,
    pick_logits,
    softmax_warning,
    unusable_output,
)
from xpubench.usermodel.reference import ModelRef, parse_reference
from xpubench.usermodel.spec import INT_DTYPES, expected_output, model_input, workload_spec
from xpubench.workloads import register_runtime
from xpubench.workloads.base import Workload

BACKEND_OF = {"torch": "torch", "flax": "jax", "keras": "keras"}
NOT_A_MODEL = "not a torch.nn.Module, a flax linen Module or a Keras 3 Model (nor a dict with the key 'model')"


@dataclass
class LoadedModel:
    ref: ModelRef
    framework: str            # "torch" | "flax" | "keras"
    model: Any
    spec: Any
    params: int               # trainable parameters
    flops: float | None       # forward FLOPs per sample, measured
    flops_method: str
    output: str = "the output"           # which part of the model's output is the logits
    vocab_source: str | None = None      # token-id inputs: where vocab_size came from
    warning: str | None = None           # what looks wrong with the model (it ends in a softmax)

    def metrics(self) -> dict:
        """What every result of this model carries."""
        out = {"model_name": self.ref.name, "model_class": type(self.model).__name__,
               "model_framework": self.framework, "model_params": self.params,
               "model_sha256": self.ref.sha256, "model_file": str(self.ref.path), "flops_method": self.flops_method,
               "model_output": self.output}
        if self.warning:
            out["model_warning"] = self.warning
        if self.vocab_source:
            out |= {"vocab_size": self.spec.vocab_size, "vocab_size_source": self.vocab_source}
        return out


def import_function(ref: ModelRef):
    """The user's function: a module reference (``pkg.mod:fn``) imported as that module, its packages'
    ``__init__`` first (here, in the worker, never in the parent: reference.find_module); a file under a
    private module name, its folder first on sys.path so that it can import its neighbours. An import
    that raises or calls ``sys.exit`` is a UserError of one line (the case's error, exit code 2)."""
    what = f"model module {ref.module}" if ref.module else f"model file {ref.path}"
    try:
        imported = importlib.import_module(ref.module) if ref.module else _import_file(ref)
    except SystemExit as exc:
        raise UserError(f"{what} called sys.exit({exc.code!r}) while being imported") from None
    except MemoryError:
        raise
    except Exception as exc:   # the user's code, any exception: its first line
        said = (str(exc).strip().splitlines() or [""])[0][:300]
        raise UserError(f"{what} raised {type(exc).__name__} while being imported: {said}") from exc
    found = Path(getattr(imported, "__file__", None) or "").resolve()
    if found != ref.path:   # another module of that name came first (one imported already, a sys.path change)
        raise UserError(f"{what} was imported from {found}, not from {ref.path}, the file the plan checked")
    return getattr(imported, ref.function)


def _import_file(ref: ModelRef):
    name = f"xpubench_user_{ref.path.stem}_{ref.sha256[:12]}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ref.path)
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(ref.path.parent))
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


def detect_framework(obj: Any) -> str | None:
    """"keras", "torch" or "flax" for a model object; never imports a framework."""
    keras = sys.modules.get("keras")
    if keras is not None and isinstance(obj, keras.Model):
        return "keras"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.nn.Module):
        return "torch"
    linen = sys.modules.get("flax.linen")
    if linen is not None and isinstance(obj, linen.Module):
        return "flax"
    nnx = sys.modules.get("flax.nnx")
    if nnx is not None and isinstance(obj, nnx.Module):
        raise UserError("flax nnx modules are not supported yet: return a linen module (or wrap it with "
                        "flax.nnx.bridge.to_linen)")
    return None


def load(case) -> LoadedModel:
    """Import, call, recognise, check and register the case's model (see the module docstring)."""
    text, file = case.options["model"], case.options.get("model_file")
    ref = parse_reference(text) if not file else dataclasses.replace(   # the file the plan resolved: any folder
        parse_reference(f"{file}:{text.rpartition(':')[2]}"), text=text)
    if "keras" not in sys.modules and (case.backend.startswith("keras") or "keras" in ref.frameworks):
        from xpubench.backends.keras_.device import import_keras, keras_backend_of

        import_keras(keras_backend_of(case))   # before the user's file imports keras
    function = import_function(ref)
    _seed(case.seed)
    returned = function()
    values = dict(returned) if isinstance(returned, dict) else {}
    model = values.pop("model", None) if isinstance(returned, dict) else returned
    options = case.options.get("model_input") or {}
    values.update(options)
    framework = detect_framework(model)
    if framework is None:
        raise UserError(f"{ref.text}: {ref.function}() returned {type(model).__name__}, {NOT_A_MODEL}")
    wanted = BACKEND_OF[framework]
    if case.backend.partition(":")[0] not in (wanted, "auto"):
        raise Unsupported(f"{ref.text} is a {framework} model: it runs with -b {wanted}, not -b {case.backend}")
    vocab_source = _vocabulary(values, options, returned, model, ref)
    spec = workload_spec(case.workload, model_input(values))
    adapter = ADAPTERS[framework](model, spec, case)
    output, warning = _check_forward(adapter, spec, ref)
    try:
        measured, method = adapter.flops()
    except Exception as exc:  # noqa: BLE001 - the counter's trouble, not the model's: FLOPs n/a, case measured
        measured, method = None, flops.count_failed(exc)
    loaded = LoadedModel(ref, framework, model, spec, adapter.params(), measured, method, output, vocab_source,
                         warning)
    register_runtime(_workload(loaded, adapter))
    return loaded


def _vocabulary(values: dict, options: dict, returned: Any, model: Any, ref: ModelRef) -> str | None:
    """Where the vocabulary of token-id inputs comes from (None for float inputs): --vocab-size, the
    returned dict, the task (tokens:V), else the model's own, which fills ``values["vocab_size"]``. A
    vocabulary larger than the model's is refused (its ids would be out of the embedding's range)."""
    if values.get("input_dtype") not in INT_DTYPES:
        return None
    found = model_vocabulary(model)
    if options.get("vocab_size") is not None:
        given, source = options["vocab_size"], "--vocab-size"
    elif isinstance(returned, dict) and returned.get("vocab_size") is not None:
        given, source = returned["vocab_size"], f"the dict {ref.function}() returned"
    elif str(values.get("task", "")).strip().startswith("tokens:"):
        return f"the task {str(values['task']).strip()}"
    elif found is not None:
        values["vocab_size"] = found[0]
        return found[1]
    else:
        return None   # model_input says what to give
    if found is not None and isinstance(given, int) and given > found[0]:
        raise UserError(f"{ref.text}: vocab_size {given} (from {source}) is larger than the model's vocabulary, "
                        f"{found[0]} ({found[1]}): token ids from {found[0]} up would be out of its range")
    return source


def _seed(seed: int) -> None:
    """Seed the frameworks the user's file imported, so its model starts from the same weights."""
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)
    if "keras" in sys.modules:
        sys.modules["keras"].utils.set_random_seed(seed)


def _check_forward(adapter, spec, ref: ModelRef) -> tuple[str, str | None]:
    """One forward pass of two synthetic samples: the model takes the input, its output holds logits of
    the task's shape. Returns (which part of the output the logits are, a warning or None)."""
    from xpubench.data import synthetic

    x = synthetic(spec, 2, 0).x_train
    try:
        output = adapter.forward(x)
    except Exception as exc:   # the model's own complaint, first line
        said = (str(exc).strip().splitlines() or [""])[0][:300]
        raise UserError(f"{ref.text}: the model does not take input of shape {x.shape} ({x.dtype}): "
                        f"{type(exc).__name__}: {said}") from exc
    pick = pick_logits(output)
    if pick is None:
        raise UserError(f"{ref.text}: the model's output is {unusable_output(output)}, in which xpubench finds no "
                        f"logits: {OUTPUT_FORMS}")
    adapter.use(pick, output)
    logits = pick(output)
    shape, accepted = tuple(logits.shape), expected_output(spec, 2)
    if shape not in accepted:
        taken = "" if pick.kind == "itself" else f" (the logits: {pick.describe(output)})"
        raise UserError(f"{ref.text}: the model's output has shape {shape} for 2 samples{taken}; task "
                        f"{spec_task(spec)} needs {' or '.join(map(str, accepted))}")
    return pick.describe(output), softmax_warning(adapter.to_numpy(logits), spec)


def spec_task(spec) -> str:
    return {"class": f"classes:{spec.num_outputs}", "binary": "binary", "series": f"regression:{spec.num_outputs}",
            "token_seq": f"tokens:{spec.num_outputs}"}[spec.target_kind]


def _workload(loaded: LoadedModel, adapter) -> Workload:
    """The workload record of this process (workloads/base.py) around the loaded model: its spec, its model
    under its framework's family, its measured FLOPs (NaN where they could not be counted). Its source is
    the user's file: weights.code_digest then invalidates cached weights when the file changes."""
    return Workload(name=loaded.spec.name, title=loaded.spec.title, kind="user", sources=(str(loaded.ref.path),),
                    spec=loaded.spec, models={adapter.family: adapter.builder},
                    forward_flops=lambda spec: loaded.flops if loaded.flops is not None else float("nan"),
                    in_default_run=False)


def prepare(case):
    """A user-model case made runnable: the model loaded and registered as the workload ``case.workload``
    in this process, ``case.backend`` "auto" resolved to its framework's. Returns (case, the metrics that
    name the model: name, class, framework, parameter count, file sha256, how its FLOPs were measured)."""
    import dataclasses

    loaded = load(case)
    backend = case.backend
    if backend == "auto":
        backend = BACKEND_OF[loaded.framework]
        if backend == "keras":
            backend = f"keras:{sys.modules['keras'].backend.backend()}"
    return dataclasses.replace(case, backend=backend), loaded.metrics()
