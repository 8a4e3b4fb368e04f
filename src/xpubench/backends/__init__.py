"""Backend registry: each backend module has ``run_case(case) -> Outcome``. Framework imports live in
the backend packages (and in workload builders) only."""

from __future__ import annotations

import importlib

from xpubench.harness.outcome import Outcome

REGISTRY = {
    "numpy": "xpubench.backends.numpy_",
    "torch": "xpubench.backends.torch_",
    "jax": "xpubench.backends.jax_",
}


def run_case(case) -> Outcome:
    return importlib.import_module(REGISTRY[case.backend]).run_case(case)
