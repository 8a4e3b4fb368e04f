"""``scripts/accelerator_check.sh --minutes 8`` run for real on this machine once per test run, read by
tests/test_accelerator_check.py: what the check did here, and the doctor's table printed from the rows its
``xpubench doctor --json`` step measured (the doctor's probes, numpy, torch and JAX in processes of their own,
~15 CPU s on a CPU-only machine, run once per test run, not once per test). Both tests are in one file, so one
xdist worker makes the run and no test of another file waits for it.

Made by whichever of the run's processes asks first, in conftest.session_dir() under conftest.session_lock
(as tests/report_runs.py makes its files); the others wait for it and read it. The environment variables the
doctor's environment check fails on (a silent CPU fallback, TF32 overridden, ...) are left out of the check's
environment, so the doctor's rows measure this machine, not the shell the tests were started from.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from conftest import session_dir, session_lock

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "accelerator_check.sh"
SILENT_FALLBACKS = ("NVIDIA_", "PYTORCH_ENABLE_MPS", "CUDA_LAUNCH")   # doctor's environment check FAILs on these


@dataclass(frozen=True)
class CheckRun:
    returncode: int
    stdout: str
    stderr: str
    out: Path            # the --out folder: one device folder inside


def check_environment(env_extra: dict | None = None) -> dict:
    """The environment the check's script runs in: this checkout's xpubench, no job end time."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), PYTHON=sys.executable, **(env_extra or {}))
    env.pop("SLURM_JOB_END_TIME", None)
    return env


@functools.cache
def on_this_machine() -> CheckRun:
    """The check's 8-minute run here (its outcome saved beside its folder in session_dir())."""
    folder = session_dir() / "accelerator-check"
    saved = folder / "run.json"
    with session_lock(folder.name):
        if not saved.exists():
            out = folder / "out"
            out.mkdir(parents=True, exist_ok=True)
            env = {k: v for k, v in check_environment().items() if not k.startswith(SILENT_FALLBACKS)}
            done = subprocess.run(["bash", str(SCRIPT), "--minutes", "8", "--out", str(out)], capture_output=True,
                                  text=True, timeout=300, env=env, check=False, stdin=subprocess.DEVNULL)
            partial = folder / f"run.json.{os.getpid()}"
            partial.write_text(json.dumps({"returncode": done.returncode, "stdout": done.stdout,
                                           "stderr": done.stderr, "out": str(out)}))
            partial.replace(saved)
    return CheckRun(**{**json.loads(saved.read_text()), "out": folder / "out"})


def cpu_doctor_rows() -> list[dict] | None:
    """The rows of the check's doctor step on this CPU-only machine (``xpubench doctor --json``: every
    installed backend on the CPU), or None where the check looked at an accelerator instead (its doctor then
    ran on that device only) or did not finish."""
    run = on_this_machine()
    folders = list(run.out.iterdir())
    if run.returncode != 0 or len(folders) != 1 or not folders[0].name.startswith("cpu-"):
        return None
    doctor_json = folders[0] / "doctor.json"
    return json.loads(doctor_json.read_text()) if doctor_json.exists() else None
