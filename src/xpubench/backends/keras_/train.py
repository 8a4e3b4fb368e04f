"""Keras 3 training with Keras's own ``model.fit``, measured by the harness (harness/training.py).

The model is the workload's Keras model (its record's ``models["keras"]``, or a user's), compiled with the
spec's loss (from logits), metric and optimizer (Adam eps 1e-8 / RMSprop rho 0.9 eps 1e-7, as the
native backends). The trainer is an *epoch Trainer*: each epoch is one ``model.fit(x, y, epochs=1,
batch_size, shuffle=True, verbose=0)`` call on numpy arrays, as the seeds called it, with a callback that
reports each step to the harness's StepTimer. What the timed regions hold:

- ``step`` (sync mode ``step``): from ``on_train_batch_begin`` to ``on_train_batch_end`` plus the sync
  (``KerasDevice.sync``). Inside: fit's own per-step Python (the callback dispatch, Keras converting the
  step's logs to Python floats, which waits for the loss), the jitted (jax) or eager (torch) train step,
  and, on the jax backend, taking the next batch from fit's data adapter (numpy slicing of the shuffled
  indices and the host-to-device copy; fit copies one batch ahead on accelerators). On the torch
  backend fit's DataLoader yields the batch before ``on_train_batch_begin``: that is in the epoch, not the
  step. This is the framework layer's cost the comparison with native is meant to show; the native
  trainers hold the whole data set on the device and slice it inside their step.
- ``step`` (sync mode ``epoch``, after the first epoch): the callback does not override
  ``on_train_batch_end``, so Keras keeps its asynchronous dispatch of batch-end callbacks; steps are
  counted at each ``on_train_batch_begin`` and the epoch is synchronised once at ``on_epoch_end``. The
  budget check of step k happens when fit begins step k + 1, so a budget cut runs one step more than the
  native loop would.
- ``epoch``: ``on_epoch_begin`` to ``on_epoch_end`` plus the sync: every step and fit's work between
  steps; not the set-up of the ``fit`` call itself (building its data adapter and callback list, before
  ``on_epoch_begin``), nor the evaluation (``evaluate`` is timed apart, with ``model.evaluate``).
- ``compile_s``: Keras compiles lazily, at the first step. For jit backends (jax; torch with
  ``--compile on``, i.e. ``jit_compile=True`` = torch.compile) ``compile`` times one ``fit`` call of one
  step on the first batch (fit's set-up, tracing + XLA / Inductor compilation, one step) until the
  device is done, then restores every model and optimizer variable: the timed steps start where they
  would have, on the same compiled function (``train_on_batch`` would not do: its batch has another
  structure than fit's and compiles a second function). Eager torch: None.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from xpubench import backends
from xpubench.backends.keras_.device import KerasDevice, import_keras, keras_backend_of, set_precision
from xpubench.harness.memory import PeakMemoryFrom
from xpubench.harness.setup import training_setup
from xpubench.harness.training import StepTimer
from xpubench.workloads import get_workload


def compile_model(keras: Any, model: Any, spec, jit_compile) -> None:
    """``model.compile`` with the spec's loss, metric and optimizer; classifiers output logits."""
    losses = keras.losses
    loss = {"softmax_ce": losses.SparseCategoricalCrossentropy(from_logits=True),
            "sigmoid_bce": losses.BinaryCrossentropy(from_logits=True),
            "mse": losses.MeanSquaredError()}[spec.loss]
    if spec.metric == "mse":
        metric = keras.metrics.MeanSquaredError(name="mse")
    elif spec.loss == "sigmoid_bce":
        metric = keras.metrics.BinaryAccuracy(threshold=0.0, name="accuracy")   # logit > 0
    else:
        metric = keras.metrics.SparseCategoricalAccuracy(name="accuracy")
    if spec.optimizer == "adam":
        optimizer = keras.optimizers.Adam(spec.learning_rate, epsilon=1e-8)
    elif spec.optimizer == "rmsprop":
        optimizer = keras.optimizers.RMSprop(spec.learning_rate, rho=0.9, epsilon=1e-7)
    else:
        raise ValueError(f"unknown optimizer {spec.optimizer}")
    model.compile(optimizer=optimizer, loss=loss, metrics=[metric], jit_compile=jit_compile)


def timing_callback(keras: Any, timer: StepTimer, pipelined: bool) -> Any:
    """A callback that reports fit's steps to the harness's timer (see the module docstring)."""

    class StepTimes(keras.callbacks.Callback):
        loss = None

        def on_epoch_begin(self, epoch, logs=None):
            timer.epoch_begin()

        def on_train_batch_begin(self, batch, logs=None):
            timer.step_begin()

        def on_train_batch_end(self, batch, logs=None):
            if timer.step_end():
                self.model.stop_training = True

        def on_epoch_end(self, epoch, logs=None):
            timer.epoch_end()
            self.loss = float(logs["loss"])

    class PipelinedSteps(StepTimes):
        on_train_batch_end = keras.callbacks.Callback.on_train_batch_end   # Keras's async dispatch stays
        started = False

        def on_train_batch_begin(self, batch, logs=None):
            if self.started and timer.step_end():   # the previous step was launched
                self.model.stop_training = True
            self.started = True

        def on_epoch_end(self, epoch, logs=None):
            timer.step_end()
            super().on_epoch_end(epoch, logs)

    return PipelinedSteps() if pipelined else StepTimes()


class KerasTrainer(PeakMemoryFrom):
    """An epoch Trainer (harness/training.py) over ``model.fit``; see the module docstring."""

    def __init__(self, case):
        if case.devices != 1:
            raise ValueError("Keras training runs on one device here (no data-parallel path yet)")
        workload = get_workload(case.workload)
        self.case, self.keras_backend = case, keras_backend_of(case)
        self.keras = keras = import_keras(self.keras_backend)
        self.device = KerasDevice(keras, self.keras_backend, case.device)
        setup = training_setup(case)
        self.spec, self.flops_per_sample = setup.spec, setup.flops_per_sample
        self.batch = self.global_batch = setup.batch
        self.steps_per_epoch = setup.steps_per_epoch
        self.x, self.y, self.x_eval, self.y_eval = setup.x_train, setup.y_train, setup.x_eval, setup.y_eval
        self.matmul_precision = set_precision(keras, self.keras_backend, case.precision)
        keras.utils.set_random_seed(case.seed)
        self.jit = {"on": True, "off": False}.get(case.compile, "auto")
        with self.device.scope():
            # after import_keras chose the backend
            self.model = backends.get(case.backend).build(workload, self.spec, case.backend)
            compile_model(keras, self.model, self.spec, self.jit)
        self._placement = self.device.check_placement(self.model)

    def describe(self) -> dict:
        return keras_metrics(self)

    @property
    def compiled(self) -> bool:
        return bool(self.model.jit_compile)

    def compile(self) -> float | None:
        """Time one train_on_batch (trace + compile + step) and undo it; None when fit runs eagerly."""
        if not self.compiled:
            return None
        variables = [*self.model.variables, *self.model.optimizer.variables]
        saved = [v.numpy() for v in variables]
        with self.device.scope():
            self.device.sync(self.model)
            start = time.perf_counter()
            self.model.fit(self.x[:self.batch], self.y[:self.batch], batch_size=self.batch, epochs=1, verbose=0,
                           shuffle=False)
            self.device.sync(self.model)
            elapsed = time.perf_counter() - start
            for v, value in zip(variables, saved):
                v.assign(value)
            self.device.sync(self.model)
        self.model.reset_metrics()
        return elapsed

    def start_epoch(self, epoch: int) -> None:
        self.epoch = epoch   # fit shuffles the samples itself, every call

    def run_epoch(self, epoch: int, steps: int, timer: StepTimer) -> float:
        callback = timing_callback(self.keras, timer, pipelined=timer.pipelined)
        with self.device.scope():
            self.model.fit(self.x, self.y, batch_size=self.batch, epochs=1, verbose=0, shuffle=True,
                           steps_per_epoch=steps if steps < self.steps_per_epoch else None, callbacks=[callback])
        if callback.loss is None:
            raise RuntimeError("fit ended without an epoch end")
        return callback.loss

    def sync(self, handle=None) -> None:
        self.device.sync(self.model)

    def evaluate(self) -> tuple[float, float]:
        with self.device.scope():
            result = self.model.evaluate(self.x_eval, self.y_eval, batch_size=self.batch, verbose=0,
                                         return_dict=True)
        return float(result["loss"]), float(result[self.spec.metric])

    def predict_eval(self):
        with self.device.scope():
            logits = self.model.predict(self.x_eval, batch_size=self.batch, verbose=0).astype(np.float32)
        shifted = np.exp(logits - logits.max(-1, keepdims=True))
        return self.x_eval, self.y_eval, shifted / shifted.sum(-1, keepdims=True)

    def placement(self) -> str:
        return self._placement

    def reset_peak_memory(self) -> None:
        self.memory = self.device.peak_memory_counter()   # made once the model exists
        super().reset_peak_memory()



def keras_metrics(trainer: KerasTrainer) -> dict:
    """What identifies the Keras run beside the measurement."""
    return {"keras_backend": trainer.keras_backend, "keras_version": trainer.keras.__version__,
            "compiled": trainer.compiled}
