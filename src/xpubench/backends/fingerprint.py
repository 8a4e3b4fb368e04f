"""Where and with what a result was measured: host, chips, driver, framework versions, git revision.

Gathered here, beside detection (``python -m xpubench.backends.detect`` runs in a child); what a
fingerprint may hold is the record format's (results/validate.py ``FINGERPRINT``)."""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from xpubench.devices import envvars
from xpubench.envnames import FLEET_MACHINE
from xpubench.units import utc_now
from xpubench.version import __version__


def package_versions(names) -> dict[str, str | None]:
    """The installed version of each distribution (None where it is not installed)."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            versions[name] = None
    return versions


def git_revision() -> str | None:
    """The xpubench source tree's commit (with '+dirty' for local changes), or None outside a checkout."""
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5,
                             check=False)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, capture_output=True,
            text=True, timeout=5, check=False,
        )
        return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def detect_environment(timeout_s: float = 120.0, backends: list[str] | None = None) -> dict[str, Any]:
    """Run device detection in a child process, so this process never initialises CUDA or a TPU;
    ``backends``: only those (backends/detect.py ``needed``; [] : the host alone), else every one."""
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    named = ["--host"] if backends == [] else backends or []
    proc = subprocess.run(
        [sys.executable, "-m", "xpubench.backends.detect", *named], capture_output=True, text=True,
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
        "packages": environment.get("packages") or {},   # the backends' distributions (backends/detect.py)
        "host": environment.get("host", {}),
        "backends": environment.get("backends", {}),
        "cpu_busy_at_start": cpu_busy_fraction(),
        "env": envvars.recorded(os.environ),
        "kernels": environment.get("kernels", {}),   # what picked the CPU kernels (devices/kernels.py)
        **fleet_machine(os.environ),
    }


def fleet_machine(environ) -> dict[str, Any]:
    """``{"fleet_machine": ENTRY}``: the ``[[machine]]`` entry `xpubench fleet` started this run for (its
    FLEET_MACHINE variable, JSON), or {} (no fleet, or a value that is not such an entry)."""
    text = environ.get(FLEET_MACHINE)
    try:
        entry = json.loads(text) if text else None
    except ValueError:
        return {}
    ok = isinstance(entry, dict) and all(isinstance(entry.get(k), str) for k in ("name", "engine"))
    return {"fleet_machine": entry} if ok else {}


def cpu_busy_fraction(interval_s: float = 0.3) -> float | None:
    """Share of all CPU time spent busy over ``interval_s`` (Linux /proc/stat), measured before any case
    runs: work by other processes that will compete with the benchmark. None where unknown."""
    def sample():
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)   # idle + iowait
        return sum(fields[:8]), idle

    try:
        total0, idle0 = sample()
        time.sleep(interval_s)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    return round(1 - (idle1 - idle0) / (total1 - total0), 3) if total1 > total0 else None


def busy_note(busy: float | None) -> str | None:
    """A warning line when other processes kept a quarter or more of the CPU busy, else None."""
    if busy is None or busy < 0.25:
        return None
    return (f"other processes kept {busy:.0%} of the CPU busy when the run started: they compete with the "
            "benchmark, so the figures will be slower and noisier than this machine can do")
