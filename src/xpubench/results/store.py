"""Results files: JSON Lines, one Run (one worker process of one case) per line, appended and flushed as
soon as the process ends; loading folds each case's runs into one Result (results/aggregate.py)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from xpubench.errors import UserError
from xpubench.results.aggregate import aggregate_all
from xpubench.results.schema import Result, Run, run_from_dict


@dataclass
class LoadedFile:
    path: Path
    runs: list[Run]                                         # the lines, in order
    warnings: list[str] = field(default_factory=list)
    results: list[Result] = field(init=False)               # one per case, its runs folded together

    def __post_init__(self) -> None:
        self.results = aggregate_all(self.runs)


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


@contextlib.contextmanager
def exclusive(path: Path):
    """Hold an advisory lock on ``path`` (which must exist) so two runs never append to one file."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no locking
        yield
        return
    with open(path, "rb") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise UserError(f"another xpubench run is using {path}: wait for it to finish") from None
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def check_writable(path: Path, what: str = "results") -> None:
    """Fail before anything runs if the file cannot be created or appended to."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    hint = "; choose another --output"
    if not parent.is_dir():
        raise UserError(f"cannot write {what} to {path}: folder {parent} does not exist{hint}")
    if path.is_dir():
        raise UserError(f"cannot write {what} to {path}: it is a folder{hint}")
    if (path.exists() and not os.access(path, os.W_OK)) or not os.access(parent, os.W_OK):
        raise UserError(f"cannot write {what} to {path}: permission denied{hint}")


def load_file(path: str | Path) -> LoadedFile:
    """Read a results file. A torn last line (a run killed mid-write) is dropped with a warning;
    any other unreadable content is refused with one line."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"results file {path} does not exist")
    if path.is_dir():
        raise UserError(f"results file {path} is a folder, not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file: not an xpubench results file") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    lines = text.splitlines()
    runs: list[Run] = []
    warnings: list[str] = []
    if not any(line.strip() for line in lines):
        raise UserError(f"{path} is empty: no results in it")
    if not lines[0].lstrip().startswith("{"):
        raise UserError(f"{path}:1: not an xpubench results file (expected one JSON object per line)")
    last = max(i for i, line in enumerate(lines) if line.strip())
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        where = f"{path}:{i + 1}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if i == last and not text.endswith("\n") and line.lstrip().startswith("{"):
                warnings.append(f"{where}: incomplete last line dropped (the run was interrupted)")
                continue
            raise UserError(f"{where}: not JSON: not an xpubench results file") from None
        runs.append(run_from_dict(record, where=where))
    return LoadedFile(path=path, runs=runs, warnings=warnings)


def load_results(paths) -> list[LoadedFile]:
    if isinstance(paths, (str, Path)):
        paths = [paths]
    return [load_file(p) for p in paths]


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
