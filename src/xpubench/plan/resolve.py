"""The planner's one resolution of where a case's inputs lie and of what its options point at: nothing
downstream (the worker, the estimates, the reports) resolves a path, reads a checkpoint's headers for its
plan, or applies a default again (docs/architecture.md, "The resolved case").

- ``resolve_paths(req)``: ``data_dir`` and ``[run.options] weights_dir`` (``--save-weights``) made
  absolute (and checked), so a plan resumes from any folder;
- ``recorded_case(record, version)``: a recorded case as this version plans it (an older file's migration);
- ``pinned(workload, options)``: a workload's pinned options (``Workload.pin_options``: llama's
  ``--weights`` folder, digest and model name, its headers read once); ``for_backend(workload, backend,
  options)``: those less the backend options this backend does not honour (``Backend.honours``:
  llama's ``--decode`` is PyTorch's decode step, so a jax or llama.cpp case neither carries it nor is
  keyed by it).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from xpubench import backends
from xpubench.case import SERVE, SERVE_KEY_OPTIONS, Case
from xpubench.errors import UserError
from xpubench.serve.keys import REMOTE
from xpubench.workloads import REGISTRY, get_workload, with_identity
from xpubench.workloads.base import Workload


def resolve_paths(req):
    """The request with its folders absolute: ``data_dir`` (resume from anywhere) and ``--save-weights``."""
    changes: dict[str, Any] = {}
    if req.data_dir:
        changes["data_dir"] = str(Path(req.data_dir).expanduser().resolve())
    if "weights_dir" in req.options:
        changes["options"] = {**req.options, "weights_dir": weights_dir(req.options["weights_dir"])}
    return dataclasses.replace(req, **changes) if changes else req


def weights_dir(value) -> str:
    """``--save-weights DIR``, checked and absolute."""
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"--save-weights needs a folder name, got {value!r}")
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise UserError(f"--save-weights {value}: that is a file, not a folder")
    return str(path.resolve())


def pinned(workload: Workload, options: dict[str, Any]) -> dict[str, Any]:
    """The options with what they point at pinned by the workload (``Workload.pin_options``)."""
    return workload.pin_options(options) if workload.pin_options else dict(options)


OWN_MEASUREMENT_BATCH = 1   # a workload that is its own measurement (the selftest): a batch of 1 unless asked


def recorded_case(record: dict[str, Any], version: int) -> Case:
    """A recorded case as this version plans it, read once when its file is loaded (results/schema.py,
    version 3): its workload's typed options (``with_identity``). A line written before version 3 is
    migrated: its workload's key options as they are now (a line may predate them, or name ``weights``
    where ``weights_id`` keys it now); a ``--weights`` case pinned before ``weights_id`` existed keyed by
    its model's name and digest (from its recorded path and digest: nothing is read); a backend option its
    backend does not honour (a jax llama case's ``decode``, which JAX never read) left out; an
    own-measurement case (the selftest) recorded without a batch size at the batch the planner gives it; a
    serving point written before serving was planned as it is planned now (``serving_point``).
    So an older file's keys are today's and it compares with a newer one; the line in the file is left as
    written. A record no case of this version can hold: one line."""
    try:
        if version < 3 and record.get("mode") == SERVE and "load" in (record.get("options") or {}):
            return with_identity(Case.from_dict(serving_point(record)))
        if version >= 3 or record.get("workload") not in REGISTRY:
            return with_identity(Case.from_dict(record))
        workload = get_workload(record["workload"])
        options = for_backend(workload, str(record.get("backend", "")),
                              pinned_record(workload, dict(record.get("options") or {})))
        own = {"batch_size": OWN_MEASUREMENT_BATCH} if workload.run and record.get("batch_size") is None else {}
        migrated = {**record, **own, "options": options, "key_options": workload.key_options}
        return with_identity(Case.from_dict(migrated))
    except (TypeError, ValueError) as exc:   # UnresolvedCase among them
        raise UserError(f"case {record.get('key')!r}: not a case this xpubench reads ({' '.join(str(exc).split())})"
                        ) from None


def pinned_record(workload: Workload, options: dict[str, Any]) -> dict[str, Any]:
    """A recorded case's options as the workload pins them now, without reading anything (only options the
    plan pinned: ``weights_sha256`` present)."""
    return pinned(workload, options) if options.get("weights_sha256") else dict(options)


def for_backend(workload: Workload, backend: str, options: dict[str, Any]) -> dict[str, Any]:
    """The options a case of ``backend`` carries: the workload's backend options only where the backend's
    record honours them (a user's model, backend "auto", carries all)."""
    mine = workload.backend_options()
    if not mine or not backends.known(backend):
        return options
    honoured = set(backends.record(backend).honours)
    return {k: v for k, v in options.items() if k not in mine or k in honoured}


def serving_point(record: dict[str, Any]) -> dict[str, Any]:
    """A serving point as ``xpubench serve`` wrote it before serving was planned (results schema 2): its users
    in ``batch_size`` (named ``users`` by results/schema.py), its load an option ("closed", "poisson 2 rps"),
    its backend "http" and its device "cpu" (the llama-server it started: the only server it started then,
    the engine that serves a GGUF) or "remote" (a --url). Read as written now, and keyed so: the same point
    of an older and a newer file compare."""
    options = dict(record.get("options") or {})
    load = str(options.pop("load", "closed")).split()
    started = record.get("device") != REMOTE
    if started:
        options.pop("url", None)    # the address the server started for the sweep had: gone with it
    rate = float(load[1]) if load[:1] == ["poisson"] and len(load) > 1 else None
    return {**record, "backend": _gguf_server() if started else record.get("backend"),
            "users": record.get("users") or record.get("batch_size"), "batch_size": None, "rate": rate,
            "options": options, "key_options": SERVE_KEY_OPTIONS}


def _gguf_server() -> str:
    return next(n for n in backends.names() if backends.known(n) and (s := backends.record(n).server()) is not None
                and s.serves == "gguf")
