"""Backend registry: each backend package defines ``BACKEND``, its record (backends/base.py). Every fact
about a framework is read from its record through these functions; framework imports live in the
backend packages (and in workload builders) only.

A backend id may carry a variant after a colon: ``keras:jax`` is the keras backend on Keras's jax backend.
Backends shipped outside xpubench register under the ``xpubench.backends`` entry-point group
(``name = "package.module"``, the module defining ``BACKEND``).
"""

from __future__ import annotations

import functools
import importlib
from importlib import metadata

REGISTRY = {
    "numpy": "xpubench.backends.numpy_",
    "torch": "xpubench.backends.torch_",
    "jax": "xpubench.backends.jax_",
    "keras": "xpubench.backends.keras_",
    "llamacpp": "xpubench.backends.llamacpp_",
    "openvino": "xpubench.backends.openvino_",
    "mlx": "xpubench.backends.mlx_",
    "sglang": "xpubench.backends.sglang_",       # servers started for serve cases (before vllm: a --url server
    "vllm": "xpubench.backends.vllm_",           # is the first whose own part of a description it gives)
}


@functools.cache
def _registry() -> dict[str, str]:
    """REGISTRY and the entry points of installed plugins (a built-in name is never replaced)."""
    found = dict(REGISTRY)
    for ep in metadata.entry_points(group="xpubench.backends"):
        found.setdefault(ep.name, ep.value)
    return found


def names() -> list[str]:
    """Every backend's name, built-ins first."""
    return list(_registry())


def get(backend: str):
    """The Backend record of a backend id (``keras:jax`` -> keras's). KeyError for an unknown name."""
    return importlib.import_module(_registry()[backend.partition(":")[0]]).BACKEND


def record(backend: str):
    """The record of ``backend``, or a record with no facts for a name no backend has yet (a user's model
    planned as ``auto``: its worker finds the framework, usermodel/load.py)."""
    from xpubench.backends.base import Backend

    return get(backend) if known(backend) else Backend()


def known(backend: str) -> bool:
    """Whether ``backend`` names a backend and, with a variant, one of its variants."""
    name, _, variant = backend.partition(":")
    if name not in _registry():
        return False
    return not variant or variant in get(name).variants


def every_id() -> list[str]:
    """Every id a user may type: the names, and ``name:variant`` for backends with variants."""
    out = []
    for name in names():
        out.append(name)
        out += [f"{name}:{v}" for v in get(name).variants]
    return out


def device_backend(backend: str) -> str:
    """The backend whose devices a case runs on: keras:jax on jax's, keras:torch on torch's; keras:tensorflow
    on the host CPU (numpy's record: TensorFlow's devices are not detected). A name no backend has (a
    results file from a newer xpubench or a plugin not installed here) is its own."""
    return get(backend).device_backend(backend) if known(backend) else backend


def fingerprint_packages() -> tuple[str, ...]:
    """The distributions every result's fingerprint records the versions of: each backend's."""
    return tuple(dict.fromkeys(p for name in names() for p in get(name).packages))


def supports(backend: str, workload) -> bool:
    """Whether ``backend`` builds ``workload``'s model (its record's ``supports``: the workload declares a
    model for the backend's family, or the backend brings its own). The planner plans no other pair."""
    return known(backend) and get(backend).supports(workload, backend)
