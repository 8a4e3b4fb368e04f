"""In the worker: a user's model imported, called, recognised, checked and registered as a workload, so
that the backends' own trainers and inference sessions run it (``get_workload(case.workload)``).

The case carries ``options["model"]`` (the reference, see reference.py) and, when given as options,
``options["model_input"]`` (ModelInput.as_options: input_shape, input_dtype, task, vocab_size,
learning_rate); values given as options win over the keys of a dict the function returns.

Framework detection looks only at frameworks the user's file has imported already (``sys.modules``),
in this order: Keras 3 (a Keras model is also a torch.nn.Module on Keras's torch backend), torch, flax
linen. What only this process can find out is a ``UserError`` (one line; the case's error): the return
value is not a model, the framework is not the case's backend, the model rejects the input (its own
message, from one forward pass of two synthetic samples) or its output does not fit the task.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import sys
import types
from dataclasses import dataclass
from typing import Any

import numpy as np

from xpubench.errors import UserError
from xpubench.usermodel import flops
from xpubench.usermodel.reference import ModelRef, parse_reference
from xpubench.usermodel.spec import expected_output, model_input, workload_spec
from xpubench.workloads import register_runtime

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

    def metrics(self) -> dict:
        """What every result of this model carries."""
        return {"model_name": self.ref.name, "model_class": type(self.model).__name__,
                "model_framework": self.framework, "model_params": self.params,
                "model_sha256": self.ref.sha256, "model_file": str(self.ref.path), "flops_method": self.flops_method}


def import_function(ref: ModelRef):
    """The user's function, from its file imported under a private module name (its folder first on
    sys.path, so that it can import its neighbours)."""
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
    return getattr(sys.modules[name], ref.function)


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
    values.update(case.options.get("model_input") or {})
    framework = detect_framework(model)
    if framework is None:
        raise UserError(f"{ref.text}: {ref.function}() returned {type(model).__name__}, {NOT_A_MODEL}")
    wanted = BACKEND_OF[framework]
    if case.backend.partition(":")[0] not in (wanted, "auto"):
        raise UserError(f"{ref.text} is a {framework} model: run it with -b {wanted}, not -b {case.backend}")
    spec = workload_spec(case.workload, model_input(values))
    adapter = ADAPTERS[framework](model, spec, case)
    _check_forward(adapter, spec, ref)
    measured, method = adapter.flops()
    loaded = LoadedModel(ref, framework, model, spec, adapter.params(), measured, method)
    register_runtime(case.workload, _workload_module(loaded, adapter))
    return loaded


def _seed(seed: int) -> None:
    """Seed the frameworks the user's file imported, so its model starts from the same weights."""
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)
    if "keras" in sys.modules:
        sys.modules["keras"].utils.set_random_seed(seed)


def _check_forward(adapter, spec, ref: ModelRef) -> None:
    from xpubench.data import synthetic

    x = synthetic(spec, 2, 0).x_train
    try:
        shape = tuple(adapter.forward_shape(x))
    except Exception as exc:   # the model's own complaint, first line
        said = (str(exc).strip().splitlines() or [""])[0][:300]
        raise UserError(f"{ref.text}: the model does not take input of shape {x.shape} ({x.dtype}): "
                        f"{type(exc).__name__}: {said}") from exc
    accepted = expected_output(spec, 2)
    if shape not in accepted:
        raise UserError(f"{ref.text}: the model's output has shape {shape} for 2 samples; task "
                        f"{spec_task(spec)} needs {' or '.join(map(str, accepted))}")


def spec_task(spec) -> str:
    return {"class": f"classes:{spec.num_outputs}", "binary": "binary", "series": f"regression:{spec.num_outputs}",
            "token_seq": f"tokens:{spec.num_outputs}"}[spec.target_kind]


def _workload_module(loaded: LoadedModel, adapter) -> types.ModuleType:
    """A workload module for this process (workloads/base.py's contract) around the loaded model."""
    module = types.ModuleType(f"xpubench.usermodel.runtime.{loaded.spec.name}")
    module.__file__ = str(loaded.ref.path)   # weights.code_digest: a change to the file invalidates cached weights
    module.SPEC = loaded.spec
    module.forward_flops = lambda spec: loaded.flops if loaded.flops is not None else float("nan")
    setattr(module, adapter.builder_name, adapter.builder)
    return module


class TorchAdapter:
    builder_name = "build_torch"

    def __init__(self, model, spec, case):
        self.model, self.spec = model, spec

    def builder(self, spec):
        return self.model

    def forward_shape(self, x: np.ndarray):
        import torch

        training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                return self.model(torch.from_numpy(x)).shape
        finally:
            self.model.train(training)

    def params(self) -> int:
        return int(sum(p.numel() for p in self.model.parameters() if p.requires_grad))

    def flops(self):
        import torch

        from xpubench.data import synthetic

        x1 = torch.from_numpy(synthetic(self.spec, 1, 0).x_train)
        training = self.model.training
        self.model.eval()
        try:
            return flops.torch_flops(lambda: self.model(x1), self.model)
        finally:
            self.model.train(training)


class FlaxAdapter:
    """A linen module, wrapped so that it takes the trainers' ``train`` flag: passed on as ``train`` or
    as ``deterministic=not train`` when its ``__call__`` has that parameter, else not at all."""

    builder_name = "build_jax"

    def __init__(self, model, spec, case):
        import flax.linen as nn
        import jax

        parameters = inspect.signature(type(model).__call__).parameters
        flag = "train" if "train" in parameters else "deterministic" if "deterministic" in parameters else None

        class YourModel(nn.Module):
            inner: nn.Module

            @nn.compact
            def __call__(self, x, train: bool = False):
                if flag == "train":
                    return self.inner(x, train=train)
                if flag == "deterministic":
                    return self.inner(x, deterministic=not train)
                return self.inner(x)

        self.wrapper, self.spec, self.seed = YourModel(inner=model), spec, case.seed
        self.key = jax.random.key(case.seed)
        self.variables = None

    def builder(self, spec):
        return self.wrapper

    def _init(self, x):
        import jax

        if self.variables is None:
            params_key, dropout_key = jax.random.split(self.key)
            self.variables = self.wrapper.init({"params": params_key, "dropout": dropout_key}, x, train=False)
        return self.variables

    def forward_shape(self, x: np.ndarray):
        return self.wrapper.apply(self._init(x), x, train=False).shape

    def params(self) -> int:
        import jax

        return int(sum(np.size(a) for a in jax.tree.leaves(self.variables["params"])))

    def flops(self):
        from xpubench.data import synthetic

        x1 = synthetic(self.spec, 1, 0).x_train
        return flops.xla_flops(lambda v, x: self.wrapper.apply(v, x, train=False), self._init(x1), x1)


class KerasAdapter:
    builder_name = "build_keras"

    def __init__(self, model, spec, case):
        from xpubench.backends.keras_.device import KerasDevice, import_keras, keras_backend_of

        self.keras = import_keras(keras_backend_of(case))
        self.device = KerasDevice(self.keras, self.keras.backend.backend(), case.device)
        self.model, self.spec = model, spec

    def builder(self, keras, spec):
        return self.model

    def forward_shape(self, x: np.ndarray):
        with self.device.scope():
            return tuple(self.model(x, training=False).shape)

    def params(self) -> int:
        return int(sum(np.prod(v.shape) for v in self.model.trainable_weights))

    def flops(self):
        from xpubench.data import synthetic

        with self.device.scope():
            return flops.keras_flops(self.keras, self.model, synthetic(self.spec, 1, 0).x_train)


ADAPTERS = {"torch": TorchAdapter, "flax": FlaxAdapter, "keras": KerasAdapter}


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
