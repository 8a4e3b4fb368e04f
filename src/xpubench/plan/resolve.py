"""The planner's one resolution of where a case's inputs lie and of what its options point at: nothing
downstream (the worker, the estimates, the reports) resolves a path, reads a checkpoint's headers for its
plan, or applies a default again (docs/architecture.md, "The resolved case").

- ``resolve_paths(req)``: ``data_dir`` and ``[run.options] weights_dir`` (``--save-weights``) made
  absolute (and checked), so a plan resumes from any folder;
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
from xpubench.case import Case
from xpubench.errors import UserError
from xpubench.workloads import REGISTRY, get_workload
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


def current_key(case: dict) -> str:
    """The key this xpubench gives a recorded case, so older files compare with newer ones: a ``--weights``
    case pinned before ``weights_id`` existed is keyed by its model's name and digest (not the path as
    typed), and a case carrying a backend option its backend does not honour (a jax llama case's
    ``decode``, which JAX never read) is keyed without it. Any other record keeps its own key."""
    key = case.get("key", "")
    if case.get("workload") not in REGISTRY:
        return key
    workload = get_workload(case["workload"])
    options = case.get("options") or {}
    current = for_backend(workload, str(case.get("backend", "")), pinned_record(workload, options))
    if current == options:
        return key
    try:
        return Case.from_dict({**case, "options": current, "key_options": workload.key_options}).key
    except (TypeError, ValueError):   # a record this xpubench can't rebuild as a case: its own key
        return key


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
