"""Where and with what a result was measured: host, chips, driver, framework versions, git revision."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata as md
import json
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from xpubench import __version__

PACKAGES = ("numpy", "torch", "jax", "jaxlib", "flax", "optax", "keras", "torchao")


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            versions[name] = None
    return versions


def git_revision() -> str | None:
    """The xpubench source tree's commit (with '+dirty' for local changes), or None outside a checkout."""
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5, check=False)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, capture_output=True,
            text=True, timeout=5, check=False,
        )
        return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def detect_environment(timeout_s: float = 120.0) -> dict[str, Any]:
    """Run device detection in a child process, so this process never initialises CUDA or a TPU."""
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    proc = subprocess.run(
        [sys.executable, "-m", "xpubench.devices.detect"], capture_output=True, text=True,
        timeout=timeout_s, env=env, check=False,
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"device detection failed: {tail}")
    return json.loads(proc.stdout)


def fingerprint(environment: dict[str, Any]) -> dict[str, Any]:
    """The provenance attached to every record of a run."""
    return {
        "xpubench": __version__,
        "git": git_revision(),
        "time": utc_now(),
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "host": environment.get("host", {}),
        "backends": environment.get("backends", {}),
        "env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "XLA_FLAGS", "CUDA_VISIBLE_DEVICES") if k in os.environ},
    }
