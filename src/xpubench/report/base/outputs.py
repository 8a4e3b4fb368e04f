"""Where ``xpubench report`` and ``xpubench compare`` may write: never over measurements, never over a
file xpubench did not write unless told to (``--force``).

Every page, Markdown file and table these commands write carries ``GENERATOR`` as a line of its own
at its start (a comment in HTML and Markdown, after ``<!DOCTYPE html>`` in HTML; the first line of a
table), a chart PNG carries ``CHART_SOFTWARE`` as its ``Software`` text chunk (matplotlib's metadata),
and a JSON comparison has its own shape: that is how a file "written by xpubench" is recognised, so
``xpubench report r.jsonl`` can be run again over its own ``xpubench-report.html``. The mark must be
that whole line: a file that merely mentions it (a copy of docs/reports.md) is the user's. Refused, in
this order (one line each, exit 2):

- a path that exists and is not a regular file (a folder, ``/dev/null``, a FIFO);
- one of the files being read (even with ``--force``);
- a file holding results (a results file, a plan sidecar; even with ``--force``);
- a non-empty file without the mark, unless ``force``;
- for a Markdown report, its ``<stem>_files/`` folder when it is a link or not a folder, and any PNG in it
  that is a link, not a regular file, or a PNG without the chart mark, unless ``force``.

Everything is written atomically (``store.write_atomically``: a temporary file beside it, renamed over
it), so an output or a chart that is a symbolic link is replaced, never written through.
"""

from __future__ import annotations

import json
import os
import re
import stat
import struct
from pathlib import Path

from xpubench.errors import UserError
from xpubench.readfile import FileProblem, check_regular_if_present
from xpubench.results import store
from xpubench.version import __version__

GENERATOR = f"generator: xpubench {__version__}"
HEAD = 4096   # bytes read to recognise a file
CHART_SOFTWARE = f"xpubench {__version__}"   # a chart PNG's Software text chunk (report/charts/performance.py)
_MARK_LINE = re.compile(rb"<!-- generator: xpubench \S+ -->|xpubench compare \(generator: xpubench \S+\)")
_PNG = b"\x89PNG\r\n\x1a\n"


def html_comment() -> str:
    return f"<!-- {GENERATOR} -->"


def _head(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(HEAD)


def written_by_xpubench(path: Path) -> bool:
    """The file is a report or comparison xpubench wrote (the mark, or a JSON comparison's shape)."""
    head = _head(path)
    lines = [line.strip() for line in head.split(b"\n", 2)[:2]]
    if lines and lines[0].lower() == b"<!doctype html>":
        lines.pop(0)
    if lines and _MARK_LINE.fullmatch(lines[0]):
        return True
    if head.startswith(_PNG):
        return _png_software(head).startswith(b"xpubench ")
    if head.lstrip().startswith(b"["):
        try:
            blob = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, RecursionError, OSError):
            return False
        return isinstance(blob, list) and bool(blob) and all(
            isinstance(c, dict) and {"baseline", "other", "rows"} <= set(c) for c in blob)
    return False


def _png_software(head: bytes) -> bytes:
    """The value of a PNG's ``Software`` tEXt chunk among the chunks in ``head`` before its image data."""
    at = len(_PNG)
    while at + 8 <= len(head):
        length, kind = struct.unpack(">I4s", head[at:at + 8])
        if kind == b"IDAT":
            break
        data = head[at + 8:at + 8 + length]
        if kind == b"tEXt" and data.startswith(b"Software\x00"):
            return data[len(b"Software\x00"):]
        at += 12 + length
    return b""


def check_image_folder(folder: Path, *, force: bool = False) -> None:
    """UserError (one line) unless a Markdown report may write its charts into ``folder``: not a link,
    a folder if it exists, and every PNG in it a regular file xpubench wrote (``force`` replaces the
    user's PNGs and links there: the link itself, never what it points at)."""
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
        kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a folder"
        raise UserError(f"cannot write the report's charts into {folder}: it is {kind}; choose another --output")
    if force:
        return
    for entry in sorted(folder.glob("*.png")):
        if entry.is_symlink() or not entry.is_file() or not written_by_xpubench(entry):
            raise UserError(f"{entry} exists and was not written by xpubench (a chart is written there): choose "
                            "another --output, or give --force to replace it")


def check_output(output: str | Path, inputs, *, force: bool = False, what: str = "the output") -> None:
    """UserError (one line) unless ``what`` may be written to ``output`` (see the module docstring)."""
    path = Path(output)
    hint = "; choose another --output"
    try:
        check_regular_if_present(path, f"cannot write {what} to")
    except FileProblem as exc:
        raise UserError(f"cannot write {what} to {path}: it {exc.reason}{hint}") from None
    if path.exists():
        for given in inputs:
            try:
                same = os.path.samefile(path, given)
            except OSError:
                same = False
            if same:
                raise UserError(f"{path} is one of the results files being read: writing {what} there would "
                                f"destroy its results{hint}")
        if store.holds_results(path):
            raise UserError(f"{path} holds xpubench results: writing {what} there would destroy them{hint}")
        if path.stat().st_size and not force and not written_by_xpubench(path):
            raise UserError(f"{path} exists and was not written by xpubench: choose another --output, or give "
                            "--force to replace it")
    store.check_writable(path, what=what)
