"""Keras 3 backend: the built-in workloads (and users' Keras models) trained with ``model.fit`` and run
for inference with ``predict_on_batch`` / ``evaluate``, on Keras's jax, torch or tensorflow backend
(``device.py``); matmul through ``keras.ops.matmul``. The measuring loops are the harness's: fit runs as
an epoch Trainer (harness/training.py StepTimer)."""

from __future__ import annotations

from xpubench.backends.base import Backend


class KerasBackend(Backend):
    name = "keras"

    def unsupported(self, case) -> str | None:
        if case.devices != 1:
            return "Keras cases run on one device (no data-parallel path)"
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
