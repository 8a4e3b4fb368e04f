"""Keras 3 backend: the built-in workloads (and users' Keras models) trained with ``model.fit`` and run
for inference with ``predict_on_batch`` / ``evaluate``, on Keras's jax, torch or tensorflow backend
(``device.py``); matmul through ``keras.ops.matmul``. The measuring loops are the harness's: fit runs as
an epoch Trainer (harness/training.py StepTimer)."""

from __future__ import annotations

from xpubench.backends.base import Backend
from xpubench.backends.keras_.device import KERAS_BACKENDS


class KerasBackend(Backend):
    name = "keras"
    title = "Keras 3"
    module = "keras"
    imports = ("keras",)   # and the framework it runs on (``installed``)
    packages = ("keras",)
    variants = KERAS_BACKENDS        # ids keras:jax, keras:torch, keras:tensorflow (-b keras: every installed one)
    precisions = ("fp32", "tf32", "bf16", "fp16", "int8")

    def family(self, backend: str) -> str:
        return "keras"               # one Keras model per workload, whatever Keras runs on

    def device_backend(self, backend: str) -> str:
        """keras:jax runs on jax's devices, keras:torch on torch's; TensorFlow's devices are not detected,
        so keras:tensorflow runs on the CPU (numpy's record: the host CPU)."""
        variant = backend.partition(":")[2] or "jax"
        return "numpy" if variant == "tensorflow" else variant

    def installed(self, env: dict, backend: str) -> bool:
        """Keras and the framework it runs on (TensorFlow: found by the keras record, never imported)."""
        records = env.get("backends", {})
        keras = records.get("keras") or {}
        variant = backend.partition(":")[2]
        runs_on = ("tensorflow" in (keras.get("keras_backends") or ()) if variant == "tensorflow"
                   else (records.get(variant) or {}).get("installed"))
        return bool(keras.get("installed") and (not variant or runs_on))

    def detect(self, host_cpu: dict) -> dict:
        """Keras 3 is found, never imported (its first import picks its backend for the process): it runs on
        the devices of the backend it runs on (keras:jax on jax's), so it lists none of its own."""
        from xpubench.devices.detect import installed, version_of

        return {"version": version_of("keras"), "devices": [],
                "keras_backends": [b for b in KERAS_BACKENDS if installed(b)]}

    def _framework_under(self, backend: str, default: str = ""):
        """The record of the framework a Keras id runs on (keras:jax: jax's), or None (TensorFlow, none named)."""
        from xpubench import backends

        variant = backend.partition(":")[2] or default
        return backends.get(variant) if variant in ("jax", "torch") else None

    def preload_modules(self, backend: str) -> tuple[str, ...]:
        """The framework under it (Keras itself reads KERAS_BACKEND at its import: the worker imports it)."""
        under = self._framework_under(backend)
        return under.preload if under else ()

    def startup_seconds(self, backend: str) -> float:
        """The framework under it starts (TensorFlow's start is not measured: the default)."""
        under = self._framework_under(backend, "jax")
        return under.startup_s if under else self.startup_s

    def unsupported(self, case) -> str | None:
        if case.devices != 1:
            return "Keras cases run on one device (no data-parallel path)"
        if case.mode == "train" and case.options.get("eval_every"):   # a quality target's (harness/target.py)
            return ("Keras runs whole epochs in its own loop (fit): it evaluates after every epoch only; drop "
                    "--eval-every")
        if case.precision in ("tf32", "fp16"):
            from xpubench.backends.keras_.device import precision_problem

            return precision_problem(case)
        return None

    def gpu_identity(self, case) -> dict:
        """The framework Keras runs on tells (keras:jax -> jax's identity of the device)."""
        from xpubench import backends

        return backends.get(backends.device_backend(case.backend)).gpu_identity(case)

    def matmul_ops(self, case):
        from xpubench.backends.keras_.matmul import ops_for

        return ops_for(case)

    def trainer(self, case, rank: int = 0, world: int = 1):
        from xpubench.backends.keras_.train import KerasTrainer

        return KerasTrainer(case)

    def session(self, case):
        from xpubench.backends.keras_.infer import KerasSession

        return KerasSession(case)


BACKEND = KerasBackend()
