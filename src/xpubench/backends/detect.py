"""What this machine has: host facts and, per registered backend, whether it is installed, its versions and
its devices (JSON-serialisable); the environment variables that change results; the CPU kernels the
libraries chose.

Run as ``python -m xpubench.backends.detect [BACKEND ...]`` to print :func:`environment` (of those
backends only: a plan's ``needed``) as JSON: the parent process calls it in a child
(backends/fingerprint.py ``detect_environment``) so that it never initialises CUDA or a TPU itself. A
backend that is not installed is never imported (its record's ``module`` is looked up with
``importlib.util.find_spec``); one whose import or initialisation fails is recorded with ``"error"`` and
detection goes on. A backend one of whose other imports (``Backend.imports``: optax for JAX) is not found
is recorded with ``"missing_imports"`` and the command that installs it (``"install"``). Every backend's
worker settings are applied first (JAX: no GPU memory preallocation), so detection never grabs GPU memory.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from xpubench import backends
from xpubench.backends.fingerprint import package_versions
from xpubench.devices import envvars, kernels
from xpubench.devices.detect import error_line, host, installed, version_of


def needed(requested: list[str] | None) -> list[str] | None:
    """The backends whose records a plan of ``requested`` backend ids reads: each one and the backend
    whose devices it runs on (keras:jax -> keras and jax; -b keras -> keras and every variant's; vllm ->
    vllm and torch). None
    (every backend) when nothing was named or a name is no backend's here (a plugin's, "auto")."""
    if not requested or not all(backends.known(b) for b in requested) or accelerator_here():
        return None
    out: list[str] = []
    for backend in requested:
        name, _, variant = backend.partition(":")
        ids = [f"{name}:{v}" for v in ([variant] if variant else backends.get(name).variants)] or [name]
        out += [name, *(backends.device_backend(i) for i in ids)]   # vllm: torch's devices
    return list(dict.fromkeys(out))


def accelerator_here() -> bool:
    """Whether this machine may have an accelerator (an NVIDIA or AMD driver's device files, nvidia-smi, a
    TPU's accel/vfio devices, a Mac's GPU): then every backend is detected, since the accelerators are part
    of the machine's identity (ceilings/cache.py machine_key) whichever backend a run uses."""
    import glob
    import shutil

    return bool(sys.platform == "darwin" or shutil.which("nvidia-smi") or shutil.which("rocm-smi")
                or any(glob.glob(p) for p in ("/dev/nvidia*", "/dev/kfd", "/dev/accel*", "/dev/vfio/[0-9]*")))


def environment(only: list[str] | None = None) -> dict[str, Any]:
    """Host facts, per backend whether it is installed, its versions and its devices, the set
    environment variables that change results (devices/envvars.py), and the CPU kernels the backends'
    libraries chose (devices/kernels.py: read after they were imported). ``only``: the backends to
    detect (``needed``); the others are never imported (a run of -b numpy does not pay torch's import):
    their records hold the versions of the installed distributions (``Backend.versions``), no devices,
    and ``"detected": false``."""
    variables = envvars.recorded(os.environ)   # before detection sets any (JAX's preallocation, libtpu's)
    h = host()
    found: dict[str, Any] = {}
    for name in backends.names():
        record = backends.get(name)
        if record.module and not installed(record.module):
            found[name] = {"installed": False, "version": None, "devices": [], "install": record.install_hint()}
            continue
        if only is not None and name not in only:   # never imported: its versions, no devices
            found[name] = {"installed": True, **record.versions(), "devices": [], "detected": False}
        else:
            try:
                record.worker_environment(None, os.environ)
                found[name] = {"installed": True, **record.detect(h["cpu"])}
            except Exception as exc:  # noqa: BLE001 - a broken backend is recorded, detection goes on
                found[name] = {"installed": True, "version": version_of(record.module or name), "devices": [],
                               "error": error_line(exc)}
        found[name].update(missing_imports(record))
    return {"host": h, "backends": found, "variables": variables, "kernels": kernels.chosen(os.environ),
            "packages": package_versions(backends.fingerprint_packages())}


def missing_imports(record) -> dict[str, Any]:
    """{"missing_imports": [...], "install": how} for a backend one of whose ``imports`` is not found here
    (looked up, never imported: ``importlib.util.find_spec``), {} when all are: an installed JAX without
    optax is said by `env`, `doctor` and the plan, not found by a worker's ModuleNotFoundError."""
    absent = [module for module in record.imports if not installed(module)]
    return {"missing_imports": absent, "install": record.install_hint()} if absent else {}


def main(argv: list[str]) -> int:
    """``python -m xpubench.backends.detect [BACKEND ... | --host]``: the environment as JSON (only those
    backends; ``--host``: none, the host's facts and the backends' versions)."""
    json.dump(environment([] if argv == ["--host"] else argv or None), sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
