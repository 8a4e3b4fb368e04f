"""Backend registry. Each backend package defines ``BACKEND``, an instance of backends.base.Backend: the
adapters the harness's measuring loops run (harness/dispatch.py). Framework imports live in the backend
packages (and in workload builders) only.

A backend may carry a variant after a colon: ``keras:jax`` is the keras backend on Keras's jax backend.
"""

from __future__ import annotations

import importlib

REGISTRY = {
    "numpy": "xpubench.backends.numpy_",
    "torch": "xpubench.backends.torch_",
    "jax": "xpubench.backends.jax_",
    "keras": "xpubench.backends.keras_",
}


def get(name: str):
    """The Backend of ``name`` (``keras:jax`` -> keras's)."""
    return importlib.import_module(REGISTRY[name.partition(":")[0]]).BACKEND


def device_backend(backend: str) -> str:
    """The backend whose devices a case runs on: keras:jax on jax's, keras:torch on torch's; TensorFlow's
    devices are not detected, so keras:tensorflow runs on the CPU (numpy's record: the host CPU)."""
    name, _, variant = backend.partition(":")
    if name != "keras":
        return backend
    return {"tensorflow": "numpy"}.get(variant, variant or "jax")


def supports(backend: str, workload) -> bool:
    """Whether ``backend`` builds ``workload``'s model: the workload (workloads/base.py) declares one for
    the backend's model family, "keras" for every keras:* id and the backend's name otherwise. The
    planner plans no other (workload, backend) pair."""
    return backend.partition(":")[0] in workload.models
