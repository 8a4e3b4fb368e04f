"""Where ``xpubench report`` and ``xpubench compare`` may write: never over measurements, never over a
file xpubench did not write unless told to (``--force``).

Every page, Markdown file and table these commands write carries ``GENERATOR`` in its first lines (a
comment in HTML and Markdown, the first line of a table), and a JSON comparison has its own shape:
that is how a file "written by xpubench" is recognised, so ``xpubench report r.jsonl`` can be run
again over its own ``xpubench-report.html``. Refused, in this order (one line each, exit 2):

- a path that exists and is not a regular file (a folder, ``/dev/null``, a FIFO);
- one of the files being read (even with ``--force``);
- a file holding results (a results file, a plan sidecar; even with ``--force``);
- a non-empty file without the mark, unless ``force``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from xpubench.errors import UserError
from xpubench.readfile import FileProblem, check_regular_if_present
from xpubench.results import store
from xpubench.version import __version__

GENERATOR = f"generator: xpubench {__version__}"
MARK = "generator: xpubench"
HEAD = 4096   # bytes read to recognise a file


def html_comment() -> str:
    return f"<!-- {GENERATOR} -->"


def _head(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(HEAD)


def written_by_xpubench(path: Path) -> bool:
    """The file is a report or comparison xpubench wrote (the mark, or a JSON comparison's shape)."""
    head = _head(path)
    if MARK.encode() in head:
        return True
    if head.lstrip().startswith(b"["):
        try:
            blob = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, RecursionError, OSError):
            return False
        return isinstance(blob, list) and bool(blob) and all(
            isinstance(c, dict) and {"baseline", "other", "rows"} <= set(c) for c in blob)
    return False


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
