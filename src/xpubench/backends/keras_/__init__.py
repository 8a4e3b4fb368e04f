"""Keras 3 backend: the built-in workloads (and users' Keras models) trained with ``model.fit`` and run
for inference with ``predict_on_batch`` / ``evaluate``, on Keras's jax, torch or tensorflow backend
(``device.py``); matmul through ``keras.ops.matmul``. The measuring loops are the harness's."""

from __future__ import annotations

from xpubench.harness.outcome import Outcome


def run_case(case) -> Outcome:
    if case.devices != 1:
        return Outcome(status="skipped", message="Keras cases run on one device (no data-parallel path)")
    if case.mode == "matmul":
        from xpubench.backends.keras_.matmul import run
    elif case.mode == "train":
        from xpubench.backends.keras_.train import run
    else:
        from xpubench.backends.keras_.infer import run
    return run(case)
