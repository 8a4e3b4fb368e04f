"""Results files: JSON Lines, one Run (one worker process of one case) per line, appended and flushed as
soon as the process ends; loading folds each case's runs into one typed Result (results/fold.py), read
with the planner's reading of a recorded case where one is handed in (``analysis.load``)."""

from __future__ import annotations

import errno
import functools
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from xpubench import readfile
from xpubench.errors import UserError
from xpubench.results.fold import aggregate_all, unique_runs
from xpubench.results.schema import CaseReader, Result, Run, run_from_dict

MAX_LINE = 32 * readfile.MiB   # one record; the largest real ones (a gallery of 32 images) are ~100 KB


@dataclass
class LoadedFile:
    path: Path
    runs: list[Run]                                         # the lines, in order, as written
    warnings: list[str] = field(default_factory=list)
    read: CaseReader | None = field(default=None, repr=False)   # the planner's reading of a recorded case

    @functools.cached_property
    def results(self) -> list[Result]:
        """One per case, its runs folded together and typed (results/fold.py aggregate_all), made when first read:
        a caller that only reads the lines (resume, a fleet's progress) never folds them."""
        return aggregate_all(self.runs, self.read)


class AppendError(UserError):
    """A result could not be appended (disk full, permission...): the file is left as it was."""


def append(path: Path, run: Run) -> None:
    """Append one record and make it durable (flush + fsync) before returning.

    On failure the file is cut back to its previous length (no half line is left behind) and
    AppendError is raised; the caller still holds the run in memory (see save_fallback)."""
    path = Path(path)
    line = run.to_json() + "\n"
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        _cut_back(path, size)
        if exc.errno == errno.ENOSPC:
            raise AppendError(f"cannot append to {path}: disk full") from None
        raise AppendError(f"cannot write results to {path}: {exc.strerror or exc}") from None


def _cut_back(path: Path, size: int) -> None:
    try:
        if path.exists() and path.stat().st_size > size:
            os.truncate(path, size)
    except OSError:
        pass


def save_fallback(path: Path, runs: list[Run]) -> Path | None:
    """Write runs that could not go to ``path`` somewhere else: next to it, else the temp folder,
    else the home folder. Returns where they went, or None if nowhere could take them."""
    path = Path(path)
    name = f"{path.name}.unsaved-{os.getpid()}.jsonl"
    for folder in (path.parent, Path(tempfile.gettempdir()), Path.home()):
        target = folder / name
        try:
            with open(target, "w", encoding="utf-8") as fh:
                fh.writelines(r.to_json() + "\n" for r in runs)
                fh.flush()
                os.fsync(fh.fileno())
            return target
        except OSError:
            try:
                target.unlink(missing_ok=True)
            except OSError:
                pass
    return None


def check_writable(path: Path, what: str = "results") -> None:
    """Fail before anything runs if the file cannot be created or appended to: its folder is missing or
    read-only, or the path is a folder, a device (``/dev/null``) or a FIFO rather than a regular file."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    hint = "; choose another --output"
    if path.is_dir():
        raise UserError(f"cannot write {what} to {path}: it is a folder{hint}")
    try:
        readfile.check_regular_if_present(path, "")
    except readfile.FileProblem as exc:
        raise UserError(f"cannot write {what} to {path}: it {exc.reason}{hint}") from None
    if not parent.is_dir():
        raise UserError(f"cannot write {what} to {path}: folder {parent} does not exist{hint}")
    if (path.exists() and not os.access(path, os.W_OK)) or not os.access(parent, os.W_OK):
        raise UserError(f"cannot write {what} to {path}: permission denied{hint}")


def write_atomically(path: str | Path, data: bytes) -> None:
    """``data`` into a new temporary file beside ``path`` (flushed and fsynced), renamed over ``path``: a
    reader sees the old file or the new one, never half of one, and a link at ``path`` is replaced by
    the file, never written through (reports, comparisons, charts, plan sidecars)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:100]}.", suffix=".tmp", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)   # as open() would have made it (mkstemp makes 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def holds_results(path: Path) -> bool:
    """``path`` is a results file (its first line a record with a schema_version) or a plan sidecar:
    measurements that an output written over it would destroy."""
    path = Path(path)
    if path.name.endswith(".plan.json"):
        return True
    try:
        with readfile.open_regular(path, "") as fh:
            head = fh.read(64 << 10)
    except UserError:
        return False
    first = head.lstrip().split(b"\n", 1)[0]
    return first.startswith(b"{") and b'"schema_version"' in first


def load_file(path: str | Path, read: CaseReader | None = None) -> LoadedFile:
    """Read a results file. A torn last line (a run killed mid-write) is dropped with a warning;
    any other unreadable content is refused with one line: a path that is not a regular file (a FIFO,
    /dev/zero), a line over MAX_LINE bytes, text that is not JSON, a record the schema refuses
    (results/validate.py). Records repeating a process already read are folded (``unique_runs``).
    ``read``: how its results read a recorded case (``schema.typed_case``)."""
    path = Path(path)
    with readfile.open_regular(path, "results file") as fh:
        runs, warnings = _read_runs(fh, path)
    runs, repeats = unique_runs(runs)
    if repeats:
        warnings.append(f"{path}: {repeats}")
    return LoadedFile(path=path, runs=runs, warnings=warnings, read=read)


def _read_runs(fh, path: Path) -> tuple[list[Run], list[str]]:
    runs: list[Run] = []
    warnings: list[str] = []
    first = True
    for number, raw in enumerate(readfile.lines(fh, str(path), MAX_LINE), start=1):
        where = f"{path}:{number}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UserError(f"{where}: not a text file: not an xpubench results file") from None
        if not line.strip():
            continue
        if first and not line.lstrip().startswith("{"):
            raise UserError(f"{where}: not an xpubench results file (expected one JSON object per line)")
        first = False
        try:
            record = readfile.loads_json(line, where)
        except UserError as exc:
            if not raw.endswith(b"\n") and line.lstrip().startswith("{"):   # the last line, cut off
                warnings.append(f"{where}: incomplete last line dropped (the run was interrupted)")
                continue
            raise UserError(f"{exc}: not an xpubench results file") from None
        runs.append(run_from_dict(record, where=where))
    if first:
        raise UserError(f"{path} is empty: no results in it")
    return runs, warnings


def load_results(paths, read: CaseReader | None = None) -> list[LoadedFile]:
    if isinstance(paths, (str, Path)):
        paths = [paths]
    return [load_file(p, read) for p in paths]


def drop_torn_tail(path: Path) -> str | None:
    """Cut an interrupted last line (no trailing newline) off ``path`` so appending can go on.

    A last line that is complete JSON but lacks its newline gets the newline instead. Returns a
    warning naming what was dropped, or None when nothing was lost."""
    path = Path(path)
    if not path.exists():
        return None
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return None
    keep = data.rfind(b"\n") + 1
    try:
        json.loads(data[keep:])
        with open(path, "ab") as fh:
            fh.write(b"\n")
        return None
    except ValueError:
        pass
    with open(path, "r+b") as fh:
        fh.truncate(keep)
    return f"{path}: dropped an incomplete last line of {len(data) - keep} bytes (the run was interrupted)"
