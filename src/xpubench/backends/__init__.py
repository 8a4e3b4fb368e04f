"""Backend registry: each backend module has ``run_case(case) -> Outcome``. Framework imports live in
the backend packages (and in workload builders) only.

A backend may carry a variant after a colon: ``keras:jax`` is the keras backend on Keras's jax backend.
A case with ``options["model"]`` (a user's model, xpubench.usermodel) is loaded and registered as a
workload first, then run by the backend of its framework."""

from __future__ import annotations

import importlib

from xpubench.harness.outcome import Outcome

REGISTRY = {
    "numpy": "xpubench.backends.numpy_",
    "torch": "xpubench.backends.torch_",
    "jax": "xpubench.backends.jax_",
    "keras": "xpubench.backends.keras_",
}


def run_case(case) -> Outcome:
    if case.options.get("model"):
        from xpubench.usermodel.load import run_case as run_user_model

        return run_user_model(case)
    return importlib.import_module(REGISTRY[case.backend.partition(":")[0]]).run_case(case)
