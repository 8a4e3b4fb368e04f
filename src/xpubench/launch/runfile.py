"""The files of one run: the results file, held by one writer at a time, and its plan sidecar
(``FILE.plan.json``), which ``--resume`` reads.

- **One writer.** A run takes an exclusive ``flock`` on the results file itself before it writes the
  plan or a result, and holds it to the end (a resume too, before it reads anything; ``xpubench serve``
  too). It opens the file itself, never through a link. The results file is
  only ever appended to or cut back, never replaced, so every run locks the same inode (the plan is
  replaced with ``os.replace``: a lock on it would be a lock on a file nobody else opens). A second run
  on the same output is refused in one line and touches nothing.
- **Default names** carry the host, the second and the process id, and skip a name already taken, so
  two runs started in the same second never share a file.
- **The plan** is read like any file a user can hand over (readfile.py: a regular file, bounded, strict
  JSON) and every case in it is checked with the results schema (results/validate.py) before it becomes
  a Case.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
import os
import socket
from pathlib import Path

from xpubench import readfile
from xpubench.case import Case
from xpubench.errors import UserError
from xpubench.results.validate import Invalid, check_case, number, optional, record, whole
from xpubench.workloads import with_identity

PLAN_VERSION = 1
MAX_PLAN = 64 * readfile.MiB
SETTINGS = record({"timeout_s": optional(number(0)), "memory_limit_bytes": optional(whole(1)),
                   "processes": optional(whole(1)), "budget_s": optional(number(0))})


def default_output(folder: Path = Path(".")) -> Path:
    """``xpubench-HOST-YYYYMMDD-HHMMSS-PID.jsonl`` in ``folder``, with ``-2``, ``-3``... if taken."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = f"xpubench-{socket.gethostname()}-{stamp}-{os.getpid()}"
    path, n = folder / f"{base}.jsonl", 1
    while path.exists() or plan_path(path).exists():
        n += 1
        path = folder / f"{base}-{n}.jsonl"
    return path


def plan_path(output: Path) -> Path:
    return Path(output).with_name(Path(output).name + ".plan.json")


@contextlib.contextmanager
def held(out: Path, *, create: bool, what: str = "run"):
    """Hold the exclusive lock on the results file ``out`` (created when ``create``) for the ``with``
    block; UserError at once if another run (or ``what``: another fleet) holds it, or if ``out`` is a link. A
    new run (``create``) also refuses a file that is not empty once the lock is held (another run wrote it in
    between)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no locking
        yield
        return
    flags = (os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)   # never waits
             | getattr(os, "O_NOFOLLOW", 0) | (os.O_CREAT if create else 0))       # on a FIFO, never through a link
    try:
        fd = os.open(out, flags, 0o644)
    except OSError as exc:
        why = "it is a link (results are never written through one)" if exc.errno == errno.ELOOP else (
            exc.strerror or exc)
        raise UserError(f"cannot write results to {out}: {why}; choose another --output") from None
    with os.fdopen(fd, "ab") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise UserError(f"another xpubench {what} is writing {out}: wait for it to finish, or choose another "
                            "--output") from None
        if create and os.fstat(fh.fileno()).st_size:
            raise UserError(f"{out} already holds results: choose another --output or --resume {out}")
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def write_plan(output: Path, cases: list[Case], settings: dict) -> None:
    """The sidecar --resume reads: every case of the run, and the run's timeout and memory limit. Checked
    first with the schema ``read_plan`` applies (a setting or case --resume would refuse is refused
    before anything runs), written atomically (never through a link), and never over a file at that
    name that is not an xpubench plan."""
    from xpubench.results.store import write_atomically

    path = plan_path(output)
    blob = {"plan_version": PLAN_VERSION, "settings": settings, "cases": [c.as_dict() for c in cases]}
    try:
        SETTINGS(json.loads(json.dumps(settings)), "settings")
    except Invalid as exc:
        raise UserError(f"--resume could not read this run's plan back ({str(exc).removeprefix('settings.')}): "
                        "give a smaller value") from None
    _check_not_foreign(path)
    try:
        write_atomically(path, json.dumps(blob, indent=1).encode())
    except OSError as exc:
        raise UserError(f"cannot write the plan {path}: {exc.strerror or exc}; choose another --output") from None


def _check_not_foreign(path: Path) -> None:
    """UserError when ``path`` exists and is not a plan xpubench wrote (a link, a folder, a user's file)."""
    if not os.path.lexists(path):
        return
    try:
        blob = None if path.is_symlink() else readfile.loads_json(readfile.read_text(path, "", MAX_PLAN), "")
    except UserError:
        blob = None
    cases = blob.get("cases") if isinstance(blob, dict) and "plan_version" in blob else blob   # first plans: a list
    if not (isinstance(cases, list) and all(isinstance(c, dict) and "run_id" in c for c in cases)):
        raise UserError(f"{path} exists and is not an xpubench plan (the run's plan is written there): move it "
                        "away, or choose another --output")


def read_plan(output: Path) -> tuple[list[Case], dict]:
    """(the cases, the settings) of ``output``'s plan; one line for anything unreadable or edited."""
    path = plan_path(output)
    where = f"cannot resume {output}: {path.name}"
    if not path.exists():
        raise UserError(f"cannot resume {output}: its plan {path.name} is missing (it is written by `run`)")
    blob = readfile.loads_json(readfile.read_text(path, f"cannot resume {output}: its plan", MAX_PLAN), where)
    if isinstance(blob, list):  # the first sidecars were a bare list of cases
        blob = {"plan_version": 1, "cases": blob}
    if not isinstance(blob, dict):
        raise UserError(f"{where} is not a plan (expected a JSON object)")
    version = blob.get("plan_version")
    if not isinstance(version, int) or isinstance(version, bool) or version > PLAN_VERSION:
        raise UserError(f"{where} has plan version {version!r}, newer than this xpubench reads; upgrade xpubench")
    raw, settings = blob.get("cases"), blob.get("settings") or {}
    try:
        if not isinstance(raw, list):
            raise Invalid("plan.cases must be a list")
        for i, d in enumerate(raw):
            check_case(d, f"plan.cases[{i}]")
        SETTINGS(settings, "plan.settings")
        cases = [with_identity(Case.from_dict(d)) for d in raw]
    except (Invalid, TypeError, ValueError) as exc:   # ValueError: a case the planner had not resolved (case.py)
        raise UserError(f"{where} is unreadable ({exc})") from None
    if [d.get("run_id") for d in raw] != [c.run_id for c in cases]:  # identity changed: matching is unsafe
        raise UserError(f"cannot resume {output}: its plan was written by another xpubench version; start a new run")
    return cases, settings


def check_checkpoints(output: Path, cases: list[Case]) -> None:
    """UserError when a ``--weights`` checkpoint the ``cases`` left to run read is gone, no longer valid, or
    differs from the digest the plan pinned (plan/usermodel.py pin_checkpoint): a resume never records
    two checkpoints under one case. No ``--allow-changed-model`` here: the case's options name the digest."""
    from xpubench.workloads.llama.checkpoint import open_checkpoint

    for pinned in {(c.options.get("weights_path"), c.options.get("weights_sha256")) for c in cases}:
        if pinned[0] and pinned[1]:
            try:
                open_checkpoint(*pinned)
            except UserError as exc:
                raise UserError(f"cannot resume {output}: {exc}") from None


def check_models(output: Path, cases: list[Case], *, allow_changed: bool = False) -> list[str]:
    """What a resume of ``output`` will import: one "FILE (sha256 ...)" per user model file the ``cases``
    left to run name. UserError when such a file is missing, or differs from the sha256 the plan recorded
    and ``allow_changed`` is not given (a plan edited to point at another file is said here too)."""
    import hashlib

    from xpubench.usermodel.reference import parse_reference

    check_checkpoints(output, cases)
    said: dict[str, str] = {}
    for case in cases:
        text, file = case.options.get("model"), case.options.get("model_file")
        if not text or (file or text) in said:
            continue
        try:
            path = Path(file) if file else parse_reference(str(text)).path
            digest = hashlib.sha256(readfile.read_bytes(path, "model file", MAX_PLAN)).hexdigest()
        except UserError as exc:
            raise UserError(f"cannot resume {output}: {exc}") from None
        recorded = case.options.get("model_sha256")
        if recorded and digest != recorded and not allow_changed:
            raise UserError(f"cannot resume {output}: model file {path} changed since the run was planned (sha256 "
                            f"{str(recorded)[:12]} then, {digest[:12]} now); put the planned version back, or "
                            "resume with --allow-changed-model (its results then carry the new sha256)")
        state = ("as planned" if digest == recorded else "not recorded by the plan" if not recorded
                 else "CHANGED since the plan, allowed by --allow-changed-model")
        said[file or text] = f"{path} (sha256 {digest[:12]}, {state})"
    return list(said.values())
