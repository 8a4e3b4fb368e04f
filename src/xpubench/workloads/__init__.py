"""Workload registry: adding a workload is one module plus one line here."""

from __future__ import annotations

import importlib
from types import ModuleType

from xpubench.errors import UserError

# name -> module path. "matmul" is special: it has no model, only N x N products.
REGISTRY: dict[str, str] = {
    "matmul": "xpubench.workloads.matmul",
    "mnist_cnn": "xpubench.workloads.mnist_cnn",
    "fashion_cnn": "xpubench.workloads.fashion_cnn",
    "cifar10_resnet": "xpubench.workloads.cifar10_resnet",
    "imdb_lstm": "xpubench.workloads.imdb_lstm",
    "shakespeare_lstm": "xpubench.workloads.shakespeare_lstm",
    "weather_gru": "xpubench.workloads.weather_gru",
    "gpt": "xpubench.workloads.gpt",
    "selftest": "xpubench.workloads.selftest",
}

# transformer workloads: in the default run and the listing, but not in MODEL_WORKLOADS, which drives the
# model-wide tests and the Keras backend (gpt is PyTorch and JAX only: its BACKENDS)
TRANSFORMER_WORKLOADS = ["gpt"]
# not models: matmul (N x N products) and selftest (deliberate faults, its own measurement)
MODEL_WORKLOADS = [name for name in REGISTRY if name not in ("matmul", "selftest", *TRANSFORMER_WORKLOADS)]

# workloads made at run time, in this process only: a user's model (xpubench.usermodel.load)
RUNTIME: dict[str, ModuleType] = {}


def register_runtime(name: str, module: ModuleType) -> None:
    """Make ``module`` (SPEC, a builder for its framework, forward_flops) the workload ``name`` in this
    process, so that every trainer and session finds it with ``get_workload``."""
    if name in REGISTRY:
        raise ValueError(f"{name!r} is a built-in workload")
    RUNTIME[name] = module


def get_workload(name: str) -> ModuleType:
    """Return the workload's module (with SPEC, build_torch, build_jax, forward_flops)."""
    if name in RUNTIME:
        return RUNTIME[name]
    if name not in REGISTRY:
        raise UserError(f"unknown workload {name!r}; choose from: {', '.join(REGISTRY)}")
    return importlib.import_module(REGISTRY[name])


def spec_of(name: str, options: dict | None = None):
    """The workload's spec for a case: ``configure(options)`` where the workload takes options (gpt's
    preset and sizes), else its SPEC."""
    mod = get_workload(name)
    configure = getattr(mod, "configure", None)
    return configure(options or {}) if configure else mod.SPEC


def key_options(name: str) -> tuple[str, ...]:
    """The case options that are part of a case's identity for this workload (``KEY_OPTIONS``: the
    selftest's behaviour, gpt's preset), in plan.Case.key. Unknown workloads have none."""
    if name not in REGISTRY and name not in RUNTIME:
        return ()
    return tuple(getattr(get_workload(name), "KEY_OPTIONS", ()))


def with_identity(case):
    """A case read from a record written before cases carried their ``key_options``: the workload's
    (case.py: ``Case.key`` reads them)."""
    import dataclasses

    if case.key_options or case.workload not in REGISTRY:
        return case
    return dataclasses.replace(case, key_options=key_options(case.workload))
