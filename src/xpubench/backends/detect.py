"""What this machine has: host facts and, per registered backend, whether it is installed, its versions and
its devices (JSON-serialisable); the environment variables that change results; the CPU kernels the
libraries chose.

Run as ``python -m xpubench.backends.detect`` to print :func:`environment` as JSON: the parent process
calls it in a child so that it never initialises CUDA or a TPU itself. A backend that is not installed is
never imported (its record's ``module`` is looked up with ``importlib.util.find_spec``); one whose import or
initialisation fails is recorded with ``"error"`` and detection goes on. Every backend's worker settings
are applied first (JAX: no GPU memory preallocation), so detection never grabs GPU memory.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from xpubench import backends
from xpubench.devices import envvars, kernels
from xpubench.devices.detect import error_line, host, installed, version_of
from xpubench.results.fingerprint import package_versions


def environment() -> dict[str, Any]:
    """Host facts, per backend whether it is installed, its versions and its devices, the set
    environment variables that change results (devices/envvars.py), and the CPU kernels the backends'
    libraries chose (devices/kernels.py: read after they were imported)."""
    variables = envvars.recorded(os.environ)   # before detection sets any (JAX's preallocation, libtpu's)
    h = host()
    found: dict[str, Any] = {}
    for name in backends.names():
        record = backends.get(name)
        if record.module and not installed(record.module):
            found[name] = {"installed": False, "version": None, "devices": []}
            continue
        try:
            record.worker_environment(None, os.environ)
            found[name] = {"installed": True, **record.detect(h["cpu"])}
        except Exception as exc:  # noqa: BLE001 - a broken backend is recorded, detection goes on
            found[name] = {"installed": True, "version": version_of(record.module or name), "devices": [],
                           "error": error_line(exc)}
    return {"host": h, "backends": found, "variables": variables, "kernels": kernels.chosen(os.environ),
            "packages": package_versions(backends.fingerprint_packages())}


def main() -> int:
    json.dump(environment(), sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
