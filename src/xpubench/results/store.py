"""Results files: JSON Lines, one Result per line, appended and flushed as soon as a case ends."""

from __future__ import annotations

import errno
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from xpubench.errors import UserError
from xpubench.results.schema import Result, result_from_dict


@dataclass
class LoadedFile:
    path: Path
    results: list[Result]
    warnings: list[str] = field(default_factory=list)


def append(path: Path, result: Result) -> None:
    """Append one record and make it durable (flush + fsync) before returning."""
    line = result.to_json() + "\n"
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise UserError(f"cannot append to {path}: disk full; free space and re-run with --resume {path}")
        raise UserError(f"cannot write results to {path}: {exc.strerror or exc}") from None


def check_writable(path: Path) -> None:
    """Fail before anything runs if the results file cannot be created or appended to."""
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UserError(f"cannot write results to {path}: folder {parent} does not exist")
    if path.is_dir():
        raise UserError(f"cannot write results to {path}: it is a folder")
    if (path.exists() and not os.access(path, os.W_OK)) or not os.access(parent, os.W_OK):
        raise UserError(f"cannot write results to {path}: permission denied; choose another --output")


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
    loaded = LoadedFile(path=path, results=[])
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
                loaded.warnings.append(f"{where}: incomplete last line dropped (the run was interrupted)")
                continue
            raise UserError(f"{where}: not JSON: not an xpubench results file") from None
        loaded.results.append(result_from_dict(record, where=where))
    return loaded


def load_results(paths) -> list[LoadedFile]:
    if isinstance(paths, (str, Path)):
        paths = [paths]
    return [load_file(p) for p in paths]


def drop_torn_tail(path: Path) -> str | None:
    """Cut an interrupted last line (no trailing newline) off ``path`` so appending can go on.

    Returns a warning naming what was dropped, or None when the file ended cleanly."""
    if not path.exists():
        return None
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return None
    keep = data.rfind(b"\n") + 1
    with open(path, "r+b") as fh:
        fh.truncate(keep)
    return f"{path}: dropped an incomplete last line of {len(data) - keep} bytes (the run was interrupted)"
