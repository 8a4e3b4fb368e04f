"""Keras 3 on one of its backends: the import that picks the backend, device placement, synchronisation,
precision policy and memory.

Keras reads KERAS_BACKEND once, at its first import, and can't switch afterwards: ``import_keras`` sets it
and refuses a Keras already imported on another backend (each case runs in its own worker process, so
only an in-process run can meet that). A case names its Keras backend as ``keras:jax``, ``keras:torch``
or ``keras:tensorflow`` (or ``keras`` with ``options["keras_backend"]``, else KERAS_BACKEND, else jax).

Synchronisation (what ``KerasDevice.sync`` waits for):
- jax: ``jax.block_until_ready`` on the model's whole state: during ``fit`` the trainer keeps it in
  ``model._jax_state`` (trainable, non-trainable, optimizer and metric variables, the outputs of the last
  jitted step; Keras documents it as what "enables callbacks to force a state sync"), else the
  variables' values.
- torch: ``torch.cuda.synchronize`` / ``torch.mps.synchronize`` (nothing to wait for on the CPU: eager
  CPU ops finish before they return).
- tensorflow: ``tf.test.experimental.sync_devices()`` (not installed here: untested).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from xpubench.devices.device import device_id, kind_of
from xpubench.errors import UserError

KERAS_BACKENDS = ("jax", "torch", "tensorflow")   # the frameworks Keras 3 runs on

DTYPE_POLICIES = {"fp32": "float32", "tf32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


def keras_backend_of(case) -> str:
    """The Keras backend a case runs on: ``keras:<name>``, else options["keras_backend"], else the
    KERAS_BACKEND environment variable, else jax."""
    _, _, name = case.backend.partition(":")
    name = name or case.options.get("keras_backend") or os.environ.get("KERAS_BACKEND") or "jax"
    if name not in KERAS_BACKENDS:
        raise UserError(f"unknown Keras backend {name!r}; choose from: {', '.join(KERAS_BACKENDS)}")
    return name


def precision_problem(case) -> str | None:
    """The native framework's gate for a tf32 or fp16 case, asked of the case's device without importing
    Keras: tf32 only on NVIDIA Ampere+ (Keras's "tensorfloat32" would be 3 bf16 passes on a TPU, fp32 on
    a CPU or an AMD GPU), no fp16 on a TPU."""
    from xpubench.devices.precisions import fp16_problem
    from xpubench.devices.records import tf32_problem

    backend, kind = keras_backend_of(case), kind_of(case.device)
    if backend == "jax":
        from xpubench.backends.jax_.device import jax_devices
        from xpubench.backends.jax_.device import precision_problem as jax_problem

        return jax_problem(jax_devices(case.device)[0], case.precision)
    if case.precision == "tf32" and backend == "torch":
        from xpubench.backends.torch_.device import tf32_unavailable, torch_device

        return tf32_unavailable(torch_device(case.device))
    return tf32_problem(kind, None, None) if case.precision == "tf32" else fp16_problem(kind)


def import_keras(backend: str) -> Any:
    """``keras`` running on ``backend``; KERAS_BACKEND is set before the first import."""
    if "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = backend
    try:
        import keras
    except ImportError as exc:
        raise UserError(f"Keras 3 on {backend} is not importable here ({exc}): pip install 'xpubench[keras]'") from exc
    if not hasattr(keras, "backend") or not keras.__version__.startswith("3."):
        raise UserError(f"the keras backend needs Keras 3, found {getattr(keras, '__version__', '?')}")
    running = keras.backend.backend()
    if running != backend:
        raise UserError(f"Keras is already running on {running} in this process; a case on Keras's {backend} "
                        "backend needs a process of its own")
    return keras


class KerasDevice:
    """The case's device as the Keras backend names it; refuses a device that is not there (never
    falls back), ``scope()`` places what is built and run inside it."""

    def __init__(self, keras: Any, backend: str, device_id: str):
        self.keras, self.backend, self.device_id = keras, backend, device_id
        if backend == "jax":
            from xpubench.backends.jax_.device import jax_devices

            (self.native,) = jax_devices(device_id)
        elif backend == "torch":
            from xpubench.backends.torch_.device import torch_device

            self.native = torch_device(device_id)
        else:
            kind, _, index = device_id.partition(":")
            self.native = f"/{kind.upper()}:{index or 0}"

    def scope(self):
        if self.backend == "torch":
            return self.keras.device(str(self.native))
        if self.backend == "jax":
            return self.keras.device(self.native)
        import tensorflow as tf

        return tf.device(self.native)

    def sync(self, target: Any = None) -> None:
        """Wait for the device. On jax, for ``target``: a Keras model (its whole state) or arrays."""
        if self.backend == "jax":
            import jax

            if hasattr(target, "variables"):
                state = getattr(target, "_jax_state", None)
                target = state if state is not None else [v.value for v in target.variables]
            jax.block_until_ready(target)
        elif self.backend == "torch":
            from xpubench.backends.torch_.device import sync

            sync(self.native)
        else:
            import tensorflow as tf

            tf.test.experimental.sync_devices()

    def placement(self, value: Any) -> str:
        """Where a tensor (or a Keras variable's value) lives, in xpubench's device words."""
        value = getattr(value, "value", value)
        if self.backend == "jax":
            from xpubench.backends.jax_.device import placement

            return placement(value)
        if self.backend == "torch":
            from xpubench.backends.torch_.device import placement

            return placement(value)
        kind, _, index = value.device.rpartition("/device:")[2].partition(":")
        return device_id(kind, int(index or 0))

    def check_placement(self, model: Any) -> str:
        """The placement of the model's weights; raises where it is not the case's device."""
        where = self.placement(model.weights[0])
        if kind_of(where) != kind_of(self.device_id):
            raise RuntimeError(f"Keras ({self.backend}) placed the model on {where}, not on {self.device_id}")
        return where

    def peak_memory_counter(self):
        """The native backend's peak-memory counter (reset right before measuring; docs/methodology.md),
        or None on a backend that has none here (tensorflow)."""
        if self.backend == "jax":
            from xpubench.backends.jax_.device import PeakMemory

            return PeakMemory([self.native])
        if self.backend == "torch":
            from xpubench.backends.torch_.device import PeakMemory

            return PeakMemory(self.native)
        return None


def set_precision(keras: Any, backend: str, precision: str) -> str | None:
    """Keras's global dtype policy for the case's precision (bf16/fp16: Keras's mixed policies, float32
    variables and 16-bit compute; fp16 with loss scaling), and the matmul precision the native backends
    use for it (true fp32 for fp32). Returns what the matmuls run as, or None where unknown."""
    if precision not in DTYPE_POLICIES:
        raise UserError(f"Keras has no training path for precision {precision}")
    keras.config.set_dtype_policy(DTYPE_POLICIES[precision])
    if backend == "jax":
        import jax

        from xpubench.backends.jax_.model import matmul_precision

        mode = matmul_precision(precision)
        jax.config.update("jax_default_matmul_precision", None if mode == "default" else mode)
        return mode
    if backend == "torch":
        import torch

        from xpubench.backends.torch_.device import set_precision_mode

        set_precision_mode(precision)
        if precision in ("bf16", "fp16"):
            return "default"
        return "tensorfloat32" if torch.backends.cuda.matmul.allow_tf32 else "highest"
    return None
