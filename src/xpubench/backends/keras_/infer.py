"""Keras 3 inference (the measurement itself is ``harness/inference.py``).

One prediction is ``model.predict_on_batch(batch)``: Keras's compiled predict function (jitted on jax;
eager on torch unless ``--compile on``), whose output Keras returns as a numpy array, so the copy of the
outputs to the host is inside every timed call (the native predictors leave outputs on the device).
The evaluation inputs are on the device (``keras.ops.convert_to_tensor`` in the device scope) before any
clock starts. Keras compiles lazily: ``compile_s`` is None and the compilation is in ``first_call_s``.

Precisions: ``fp32`` the trained model; ``bf16`` / ``fp16`` a clone whose every layer has the dtype
policy ``bfloat16`` / ``float16`` (weights stored and computed in it, outputs cast to fp32 for scoring);
``int8`` Keras's own ``model.quantize("int8")`` on a clone (its Dense, EinsumDense and Embedding layers:
int8 weights with per-channel scales; the others stay float).
Training before inference is untimed: ``model.fit`` for the case's epochs and steps.
"""

from __future__ import annotations

import re

import numpy as np

from xpubench.backends.keras_.train import KerasTrainer
from xpubench.harness.inference import NotApplicable, batch_count, check_int8_share, pad_rows
from xpubench.harness.memory import PeakMemoryFrom
from xpubench.harness.session import TrainedSession

POLICIES = {"fp32": None, "tf32": None, "bf16": "bfloat16", "fp16": "float16"}
INT8_LAYERS = ("Dense", "EinsumDense", "Embedding")


class KerasPredictor(PeakMemoryFrom):
    """``predict_on_batch`` over the padded evaluation batches, already on the device."""

    def __init__(self, trainer: KerasTrainer, model, x: np.ndarray, batch: int):
        self.trainer, self.model, self.batch, self.n = trainer, model, batch, len(x)
        x = pad_rows(np.asarray(x), batch_count(self.n, batch) * batch)
        ops = trainer.keras.ops
        with trainer.device.scope():
            self.batches = [ops.convert_to_tensor(x[i:i + batch]) for i in range(0, len(x), batch)]
        trainer.device.sync(model)

    def compile(self):
        return None   # lazy: the first call compiles (first_call_s)

    def predict(self, i: int):
        with self.trainer.device.scope():
            return self.model.predict_on_batch(self.batches[i])

    def sync(self, handle) -> None:
        self.trainer.device.sync(self.model)   # the output itself is on the host already

    def host(self, handle) -> np.ndarray:
        return np.asarray(handle).astype(np.float32)

    def model_bytes(self) -> int:
        return int(sum(v.numpy().nbytes for v in self.model.weights))

    def placement(self) -> str:
        return self.trainer.device.placement(self.batches[0])

    def reset_peak_memory(self) -> None:
        self.memory = self.trainer.device.peak_memory_counter()   # made once the model exists
        super().reset_peak_memory()


def int8_report(model) -> dict:
    """Which layers Keras's int8 quantization covers and their share of the parameters."""
    int8, other, covered, total = [], [], 0, 0
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if layer._layers:   # a container: its leaves are counted
            continue
        count = sum(int(np.prod(v.shape)) for v in layer.weights)
        if not count:
            continue
        total += count
        if type(layer).__name__ in INT8_LAYERS:
            int8.append(layer.name)
            covered += count
        else:
            other.append(layer.name)
    return {"int8": int8, "fp32": other, "int8_param_fraction": covered / total if total else 0.0,
            "method": "keras Model.quantize('int8')"}


def same_variable(name: str, index: int, path: str) -> bool:
    """Whether a cached weight's ``index:path`` names the model's ``index``-th variable at ``path``, up to the
    numbers Keras appends to auto-named layers and models (``conv2d_2`` in the process that trained, ``conv2d_33``
    in one that built other models first)."""
    def unnumbered(text: str) -> str:
        return "/".join(re.sub(r"_\d+$", "", part) for part in text.split("/"))

    cached_index, _, cached_path = name.partition(":")
    return cached_index == str(index) and unnumbered(cached_path) == unnumbered(path)


class KerasSession(TrainedSession):
    def make_trainer(self, case):
        return KerasTrainer(case)

    def framework(self) -> str:
        return f"keras {self.trainer.keras.__version__} on {self.trainer.keras_backend}"

    def training_data(self) -> tuple[np.ndarray, ...]:
        return self.trainer.x, self.trainer.y

    def code_modules(self) -> tuple:
        from xpubench.backends.keras_ import train

        return (train,)

    def describe(self) -> dict:
        from xpubench.backends.keras_.train import keras_metrics

        return keras_metrics(self.trainer)

    def precheck(self, precision: str) -> None:
        if precision == "int8":
            check_int8_share(int8_report(self.trainer.model), self.case.workload)
        elif precision not in POLICIES:
            raise NotApplicable(f"no Keras inference path for precision {precision}")

    def train(self) -> dict[str, np.ndarray]:
        t, case = self.trainer, self.trainer.case
        steps = min(case.steps or t.steps_per_epoch, t.steps_per_epoch)
        with t.device.scope():
            t.model.fit(t.x, t.y, batch_size=t.batch, epochs=case.epochs or 1, verbose=0, shuffle=True,
                        steps_per_epoch=steps if steps < t.steps_per_epoch else None)
        return {f"{i}:{v.path}": v.numpy() for i, v in enumerate(t.model.weights)}

    def load(self, arrays: dict[str, np.ndarray]) -> None:
        variables = self.trainer.model.weights
        if len(arrays) != len(variables):
            raise ValueError("cached weights do not match the model's variables")
        for index, (v, (name, value)) in enumerate(zip(variables, arrays.items())):
            if not same_variable(name, index, v.path) or tuple(value.shape) != tuple(v.shape):
                raise ValueError(f"cached weight {name} does not match {v.path}")
            v.assign(value)

    def predictor(self, precision: str):
        t = self.trainer
        _keras, model, report = t.keras, t.model, {}
        if precision == "int8":
            report = int8_report(model)
            model = self.clone(None)
            model.quantize("int8")
        elif POLICIES[precision]:
            model = self.clone(POLICIES[precision])
        return KerasPredictor(t, model, t.x_eval, t.batch), report

    def clone(self, policy: str | None):
        """A copy of the trained model, every layer with dtype policy ``policy`` (None: as it is)."""
        keras, model = self.trainer.keras, self.trainer.model

        def layer_copy(layer):
            config = layer.get_config()
            if policy is not None:
                config["dtype"] = policy
            return layer.__class__.from_config(config)

        with self.trainer.device.scope():
            copy = keras.models.clone_model(model, clone_function=layer_copy)
            copy.set_weights([np.asarray(w) for w in model.get_weights()])
        return copy
