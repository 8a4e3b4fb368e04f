"""What each case's worker processes took on this machine, kept between runs so that the next plan's
estimates are learnt from it (plan/learnt.py) instead of modelled: ``$XDG_CACHE_HOME/xpubench/history.jsonl``
(``~/.cache/xpubench/history.jsonl`` when XDG_CACHE_HOME is unset; ``XPUBENCH_HISTORY`` names another file,
"off" keeps none).

One JSON line per worker process that ended ok, appended when it ends (``Recorder``):

* ``machine``: a digest of the machine's hardware and the variables that change what a backend runs on
  (backends/identity.py: the part of the ceilings cache's key that does not depend on which backends a
  command detected), and ``version``: the versions of the case's own backend (its framework, jaxlib, CUDA,
  the BLAS). A line is read back only where both equal this machine's;
* ``id``: the case's timing identity (``timing_id``: its run id less its price, so a priced run learns
  from an unpriced one), with ``key``, ``workload``, ``backend``, ``device`` and ``mode`` for a reader
  and for the scaling of cases never measured here;
* ``duration_s`` (the process's wall time, as the results file records it), ``case_s`` (its time in the
  case: set-up, compilation, measurement; the rest is the worker's start and exit), ``compile_s``;
* ``estimate_s``: what the model (plan/estimate.py) said for it, so a case never measured learns by how
  much the model is off for its workload and backend here;
* ``at``: when the process started; ``busy``: the share of the CPU other processes kept busy when its run
  started (the fingerprint's ``cpu_busy_at_start``): plan/learnt.py learns from the quiet ones first.

A results file read back (``--resume``) adds its own processes' lines for that run (``entries_of``).
Nothing here is ever an error for the run: an unreadable or foreign line is skipped, a history that cannot
be written is said once and the run goes on. The file is kept under ``MAX_BYTES`` by dropping its older half.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpubench import envnames, readfile
from xpubench.backends.identity import VERSION_FIELDS, machine_key
from xpubench.errors import UserError

MAX_BYTES = 2 * readfile.MiB


def history_path(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The history file, None where ``XPUBENCH_HISTORY=off``."""
    given = environ.get(envnames.HISTORY)
    if given:
        return None if given.strip().lower() == "off" else Path(given).expanduser()
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "xpubench" / "history.jsonl"


def _digest(value: Any) -> str:
    return hashlib.sha1(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def machine_digest(env: dict, environ: Mapping[str, str] = os.environ) -> str:
    """This machine's hardware and backend-changing variables (backends/identity.py), as a digest."""
    key = machine_key(env, environ)
    return _digest({"hardware": key["hardware"], "env": key["software"]["env"]})


def backend_version(env: dict, backend: str) -> str:
    """The versions of one backend as ``env`` detected them ("" where it was not detected)."""
    info = (env.get("backends") or {}).get(str(backend).split(":")[0]) or {}
    return _digest({k: info.get(k) for k in VERSION_FIELDS if info.get(k) is not None}) if info else ""


def timing_id(case: Mapping) -> str:
    """What decides how long a case takes: its fields (run lengths included: the run id's) less its price."""
    fields = {k: v for k, v in case.items() if k not in ("key", "run_id", "key_options")}
    fields["options"] = {k: v for k, v in (fields.get("options") or {}).items() if k != "price_per_hour"}
    return _digest(fields)


@dataclass(frozen=True)
class Entry:
    """One worker process of a case, as the history keeps it (module docstring)."""

    id: str
    key: str
    workload: str
    backend: str
    device: str
    mode: str
    duration_s: float
    case_s: float | None = None
    compile_s: float | None = None
    estimate_s: float | None = None
    at: str = ""
    busy: float | None = None       # the share of the CPU other processes kept busy when its run started


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def entry_of(line: Mapping) -> Entry | None:
    """An Entry from a history line or a run's fields, None where it lacks what an estimate needs."""
    duration = _number(line.get("duration_s"))
    text = {k: line.get(k) for k in ("id", "key", "workload", "backend", "device", "mode")}
    if not duration or not all(isinstance(v, str) and v for v in text.values()):
        return None
    return Entry(**text, duration_s=duration, case_s=_number(line.get("case_s")),
                 compile_s=_number(line.get("compile_s")), estimate_s=_number(line.get("estimate_s")),
                 at=str(line.get("at") or ""), busy=_number(line.get("busy")))


def entries_of(runs: Iterable) -> list[Entry]:
    """The ok processes of a results file's runs (``--resume``: the file's own) as entries."""
    out = []
    for run in runs:
        case = run.case
        if run.status == "ok":
            found = entry_of({**{k: case.get(k) for k in ("key", "workload", "backend", "device", "mode")},
                              "id": timing_id(case), "duration_s": run.duration_s, "at": run.started_at,
                              "busy": (run.fingerprint or {}).get("cpu_busy_at_start"),
                              **{k: run.metrics.get(k) for k in ("case_s", "compile_s")}})
            out += [found] if found else []
    return out


def read(env: dict, path: Path | None = None, environ: Mapping[str, str] = os.environ) -> list[Entry]:
    """The entries of this machine (``env``: its detection record) whose backend versions are the ones
    ``env`` detected, oldest first; [] without a readable history."""
    path = path if path is not None else history_path(environ)
    if path is None:
        return []
    try:
        text = readfile.read_bytes(path, "timing history", MAX_BYTES * 2).decode("utf-8", "replace")
    except (UserError, OSError):
        return []
    here, versions, out = machine_digest(env, environ), {}, []
    for raw in text.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(line, dict) or line.get("machine") != here:
            continue
        backend = str(line.get("backend"))
        if backend not in versions:
            versions[backend] = backend_version(env, backend)
        found = entry_of(line) if line.get("version") == versions[backend] else None
        out += [found] if found else []
    return out


@dataclass
class Recorder:
    """Appends each ok worker process of a run to the history (``add``), with the model's estimate for it;
    the first failure to write is kept in ``problem`` (said once by the caller) and the rest skipped."""

    env: dict
    modelled: Mapping[str, float | None]                # run id -> the model's seconds per process
    path: Path | None = field(default_factory=history_path)
    problem: str | None = None

    def add(self, run) -> None:
        if self.path is None or self.problem or run.status != "ok" or not run.duration_s:
            return
        line = {"machine": machine_digest(self.env), "version": backend_version(self.env, run.case.get("backend")),
                "id": timing_id(run.case), **{k: run.case.get(k) for k in ("key", "workload", "backend", "device",
                                                                            "mode")},
                "duration_s": run.duration_s, "case_s": run.metrics.get("case_s"),
                "compile_s": run.metrics.get("compile_s"), "estimate_s": self.modelled.get(run.case.get("run_id")),
                "at": run.started_at, "busy": (run.fingerprint or {}).get("cpu_busy_at_start")}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(line, sort_keys=True, default=str) + "\n")
            if self.path.stat().st_size > MAX_BYTES:
                _keep_newer_half(self.path)
        except OSError as exc:
            self.problem = (f"the timing history {self.path} cannot be written ({exc.strerror or exc}): the next "
                            "estimates will not learn from this run")


def _keep_newer_half(path: Path) -> None:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".history-", suffix=".jsonl")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.writelines(lines[len(lines) // 2:])
    os.replace(tmp, path)
