"""Reading a file a user hands over (results, plans, configs, prices, environment records, the ceilings
cache): one line on any problem, never a traceback, a hang or a memory blow-up.

- Only regular files: a folder, a FIFO (whose open would wait for a writer), a character device
  (``/dev/zero`` never ends) or a socket is refused before a byte is read. The file is opened with
  ``O_NONBLOCK`` and checked with ``fstat`` on the open descriptor, so a path swapped for a FIFO between
  a check and the open cannot hang the reader either.
- Bounded: a whole file above its limit (``read_text``), or one line above its limit (``lines``), is
  refused rather than read into memory.
- Strict JSON (``loads_json``): ``NaN`` and ``Infinity`` (not JSON) are refused, a number too large for a
  float (``1e400``) is refused, nesting deep enough to exhaust Python's recursion (``[[[[...``) is one
  line, not a RecursionError. TOML the same way (``loads_toml``).

Every problem is a :class:`FileProblem` (a UserError): exit code 2 in the CLI.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from xpubench.errors import UserError

MiB = 1 << 20


class FileProblem(UserError):
    """A file that cannot be read as asked; ``reason`` is the message without the file's name."""

    def __init__(self, what: str, path, reason: str):
        super().__init__(f"{what} {path} {reason}" if what else f"{path} {reason}")
        self.path, self.reason = path, reason


def _not_regular(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "special")
    return f"is {kind}, not a regular file"


def open_regular(path: str | Path, what: str) -> BinaryIO:
    """``path`` opened for binary reading, or FileProblem: missing, unreadable, or not a regular file."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise FileProblem(what, path, "does not exist") from None
    except IsADirectoryError:
        raise FileProblem(what, path, "is a folder, not a file") from None
    except OSError as exc:
        raise FileProblem(what, path, f"is unreadable: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise FileProblem(what, path, _not_regular(mode))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_regular_if_present(path: str | Path, what: str) -> None:
    """FileProblem when ``path`` exists and is not a regular file (an output that must be a plain file)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode):
        raise FileProblem(what, path, _not_regular(mode))


def read_bytes(path: str | Path, what: str, limit: int) -> bytes:
    """The whole file, at most ``limit`` bytes (FileProblem above it)."""
    try:
        with open_regular(path, what) as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise FileProblem(what, path, f"is unreadable: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise FileProblem(what, path, f"is larger than {_size(limit)}: not what xpubench expects there")
    return data


def read_text(path: str | Path, what: str, limit: int, hint: str = "") -> str:
    """The whole file as UTF-8 text, at most ``limit`` bytes."""
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FileProblem(what, path, f"is not a text (UTF-8) file{hint}") from None


def lines(fh: BinaryIO, where: str, limit: int) -> Iterator[bytes]:
    """The lines of an open file (each with its newline, the last maybe without), none above ``limit``
    bytes: a longer line is a UserError before more of it is read."""
    number = 0
    while True:
        line = fh.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit and not line.endswith(b"\n"):
            raise UserError(f"{where}:{number}: a line longer than {_size(limit)}: not an xpubench results file")
        yield line


def _size(limit: int) -> str:
    return f"{limit // MiB} MiB" if limit >= MiB else f"{limit} bytes"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:20]} is too large")
    return value


MAX_JSON_DEPTH = 200   # xpubench's own records nest < 10 deep; the interpreter's recursion limit is no bound (a
                       # library may raise it: torch's compiler does), so the depth is checked after parsing too


def loads_json(text: str | bytes, where: str) -> Any:
    """Strict JSON (see the module docstring), at most ``MAX_JSON_DEPTH`` deep; UserError ``where: not
    valid JSON (why)``."""
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        raise UserError(f"{where}: JSON nested too deeply to read") from None
    except ValueError as exc:   # JSONDecodeError, our constants, ints over Python's digit limit
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise UserError(f"{where}: not JSON ({' '.join(reason.split())[:200]})") from None
    if _deeper_than(value, MAX_JSON_DEPTH):
        raise UserError(f"{where}: JSON nested too deeply to read (more than {MAX_JSON_DEPTH} levels)")
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether lists/objects nest more than ``limit`` deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def loads_toml(text: str, where: str) -> dict:
    """TOML text -> dict; UserError ``where is not valid TOML: why``."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise UserError(f"{where} is not valid TOML: nested too deeply") from None
    except ValueError as exc:   # TOMLDecodeError
        raise UserError(f"{where} is not valid TOML: {' '.join(str(exc).split())[:200]}") from None
