"""The site's output folder: it holds only what `xpubench site` wrote, known by a manifest of its own.

``.xpubench-site.json`` names every file a build wrote (``index.html``, ``w/matmul.html``,
``r/<run>.jsonl``, the cache) with the sha256 of its content. A build:

- refuses a folder that holds anything else: a file or folder the manifest does not name, a named file
  whose content is not what was written, a link (at any name: never followed), a FIFO, socket or device;
  a folder without a manifest must be empty (a site written before the manifest existed included);
- writes each file atomically (a temporary file beside it, then ``os.replace``, which replaces a name and
  never follows it) and leaves a file whose content is unchanged untouched;
- deletes only files the manifest names, with the content it names: pages of results files no longer
  given.

Before the first file is written the manifest names both the old and the new content of every file, so a
build killed half-way leaves a folder the next build accepts. Names are checked (``NAME``): a manifest
can't name a file outside the folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import tempfile
from pathlib import Path

from xpubench.errors import UserError
from xpubench.legible.plaintext import shown
from xpubench.readfile import open_regular

MANIFEST = ".xpubench-site.json"
VERSION = 1
FOLDERS = ("w", "r")
NAME = re.compile(r"(?:[wr]/)?[A-Za-z0-9_][A-Za-z0-9_.-]*")   # no "/", "..", or leading "." but the cache's
CACHE = ".xpubench-cache.json"
HEX = re.compile(r"[0-9a-f]{64}")
MAX_MANIFEST = 64 << 20


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path) -> str:
    """The sha256 of a regular file's content (FileProblem, one line, for a FIFO or device: never blocks)."""
    h = hashlib.sha256()
    with open_regular(path, "") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _refuse(out: Path, what: str) -> UserError:
    return UserError(f"{shown(out)} holds {what}: choose an empty or new folder for the site")


def _manifest(out: Path) -> dict[str, list[str]]:
    """The manifest's {name: [sha256, ...]}; UserError when it is not one xpubench wrote."""
    path = out / MANIFEST
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_MANIFEST:
            raise ValueError("not a plain file of a sensible size")
        blob = json.loads(path.read_bytes())
        files = blob["files"]
        if blob.get("xpubench_site") != VERSION or not isinstance(files, dict):
            raise ValueError("another version or shape")
        for name, sums in files.items():
            if (not (NAME.fullmatch(name) or name == CACHE) or not isinstance(sums, list) or not sums
                    or not all(isinstance(s, str) and HEX.fullmatch(s) for s in sums)):
                raise ValueError(f"an entry {name!r} that is not a file of a site")
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise _refuse(out, f"a {MANIFEST} that xpubench did not write ({' '.join(str(exc).split())[:120]})") from None
    return files


def _kind(path: Path) -> str:
    mode = path.lstat().st_mode
    return ("a file" if stat.S_ISREG(mode) else "a folder" if stat.S_ISDIR(mode)
            else "a link" if stat.S_ISLNK(mode) else "a FIFO, socket or device")


def scan(out: Path) -> dict[str, str]:
    """{name: sha256} of the files an earlier build wrote into ``out`` ({} for a new or empty folder);
    UserError (one line) when it holds anything else (see the module)."""
    try:
        entries = sorted(out.iterdir()) if out.is_dir() and not out.is_symlink() else None
    except OSError as exc:
        raise UserError(f"{shown(out)}: cannot read the folder ({exc.strerror})") from None
    if entries is None:
        if os.path.lexists(out):
            raise UserError(f"{shown(out)}: not a folder (the site is a folder of pages); choose another -o")
        return {}
    if not entries:
        return {}
    if not (out / MANIFEST).exists() and not (out / MANIFEST).is_symlink():
        names = ", ".join(shown(p.name) for p in entries[:3])
        raise _refuse(out, f"files xpubench did not write ({names}; a site is known by its {MANIFEST})")
    files, present = _manifest(out), {}
    for path in [p for p in entries if p.name != MANIFEST]:
        name, kind = path.name, _kind(path)
        if kind == "a folder" and name in FOLDERS:
            for inner in sorted(path.iterdir()):
                present[f"{name}/{inner.name}"] = _check_file(out, f"{name}/{inner.name}", files)
        elif kind == "a folder":
            raise _refuse(out, f"a folder xpubench did not write ({shown(name)})")
        else:
            present[name] = _check_file(out, name, files)
    return present


def _check_file(out: Path, name: str, files: dict[str, list[str]]) -> str:
    kind = _kind(out / name)
    if kind != "a file":
        raise _refuse(out, f"{kind} at {shown(name)} (never followed or replaced)")
    if name not in files:
        raise _refuse(out, f"a file xpubench did not write ({shown(name)})")
    sha256 = file_digest(out / name)
    if sha256 not in files[name]:
        raise _refuse(out, f"{shown(name)}, changed since xpubench wrote it")
    return sha256


class Writer:
    """Writes a site into ``out`` (``scan`` first): ``put``/``copy`` each file, then ``finish``."""

    def __init__(self, out: Path, old: dict[str, str]):
        self.out, self.old, self.new = out, old, {}
        self.pending: dict[str, bytes | Path] = {}

    def put(self, name: str, content: str | bytes) -> None:
        data = content.encode("utf-8") if isinstance(content, str) else content
        self.new[name] = digest(data)
        self.pending[name] = data

    def copy(self, name: str, source: Path, sha256: str) -> None:
        """A file copied as it is (``sha256``: its content's, checked again while copying)."""
        self.new[name] = sha256
        self.pending[name] = source

    def keep(self, name: str) -> bool:
        """Keep a file an earlier build wrote (a run's report); False when there is none."""
        if name not in self.old:
            return False
        self.new[name] = self.old[name]
        return True

    def finish(self) -> None:
        """Write every file, delete the earlier build's files no longer written, then the final manifest."""
        self.out.mkdir(parents=True, exist_ok=True)
        for folder in FOLDERS:
            (self.out / folder).mkdir(exist_ok=True)
            if _kind(self.out / folder) != "a folder":   # made by someone else since the scan
                raise _refuse(self.out, f"{_kind(self.out / folder)} at {folder}")
        both = {n: sorted({d for d in (self.old.get(n), self.new.get(n)) if d}) for n in {*self.old, *self.new}}
        self._manifest(both)
        for name, what in self.pending.items():
            if self.new[name] != self.old.get(name):
                self._write(name, what)
        for name in sorted(set(self.old) - set(self.new)):
            path = self.out / name
            if os.path.lexists(path) and _kind(path) == "a file" and file_digest(path) == self.old[name]:
                path.unlink()
        self._manifest({n: [d] for n, d in self.new.items()})

    def _manifest(self, files: dict[str, list[str]]) -> None:
        blob = {"xpubench_site": VERSION, "files": dict(sorted(files.items()))}
        self._write(MANIFEST, json.dumps(blob, indent=0).encode("ascii"))

    def _write(self, name: str, what: bytes | Path) -> None:
        target = self.out / name
        fd, tmp = tempfile.mkstemp(prefix=".xpubench-", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                if isinstance(what, Path):
                    h = hashlib.sha256()
                    with open_regular(what, "results file") as src:
                        for block in iter(lambda: src.read(1 << 20), b""):
                            h.update(block)
                            fh.write(block)
                    if h.hexdigest() != self.new[name]:
                        raise UserError(f"{shown(what.name)} changed while the site was built: build it again")
                else:
                    fh.write(what)
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            os.unlink(tmp)
            raise
