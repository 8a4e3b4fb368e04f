"""Safe extraction of dataset tar archives.

Every member is checked before anything is written: absolute paths, ``..`` components, links and
special files make the whole archive refused (UserError naming the member), and so does a total size
above MAX_EXTRACTED (a tar bomb). Files are extracted into
a staging folder inside the destination and moved into place only when all of them are written, so
an interrupted extraction never leaves a half-filled dataset folder behind.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from xpubench.errors import UserError

_READ_ERRORS = (tarfile.TarError, EOFError, OSError, zlib.error)
MAX_EXTRACTED = 4 << 30   # the published CIFAR-10 binary archive holds 184 MB


def _why_unsafe(member: tarfile.TarInfo, dest: Path) -> str | None:
    """Why a member must not be extracted into dest, or None when it is a plain file or folder inside it."""
    if member.issym() or member.islnk():
        return "a link"
    if not (member.isfile() or member.isdir()):
        return "not a regular file or folder"
    name = member.name
    pure = PurePosixPath(name)
    if not name or pure.is_absolute() or name.startswith(("/", "\\")) or ":" in pure.parts[0]:
        return "an absolute path"
    if any(part == ".." for part in pure.parts) or "\\" in name:
        return "a path that leaves the target folder"
    target = (dest / pure).resolve()
    if target != dest and dest not in target.parents:
        return "a path that leaves the target folder"
    return None


def safe_extract(archive: Path, dest: Path, *, keep: Callable[[str], bool] | None = None) -> list[Path]:
    """Extract the regular files of a tar archive (any compression) into dest; return their paths.

    ``keep(name)`` selects members to extract (all by default); unsafe members are refused even when
    they would not be kept.
    """
    dest = dest.resolve()
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            for member in members:
                why = _why_unsafe(member, dest)
                if why is not None:
                    raise UserError(f"{archive}: refusing to extract member {member.name!r} ({why}); "
                                    f"the archive is not the published one, delete it")
            chosen = [m for m in members if m.isfile() and (keep is None or keep(m.name))]
            total = sum(m.size for m in chosen)
            if total > MAX_EXTRACTED:
                raise UserError(f"{archive}: its files would take {total:,} bytes once extracted, more than "
                                f"xpubench extracts ({MAX_EXTRACTED >> 30} GiB); the archive is not the published "
                                "one, delete it")
            return _extract(tar, chosen, archive, dest)
    except UserError:
        raise
    except _READ_ERRORS as exc:
        raise UserError(f"cannot read archive {archive} ({exc}); it is incomplete or corrupt, "
                        f"delete it and download it again") from None


def _extract(tar: tarfile.TarFile, members: list[tarfile.TarInfo], archive: Path, dest: Path) -> list[Path]:
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{archive.name}.", suffix=".extracting", dir=dest))
    except OSError as exc:
        raise UserError(f"cannot extract {archive} into {dest} ({exc.strerror}): extract it yourself "
                        f"or pass a writable --data-dir") from None
    try:
        for member in members:
            target = staging / PurePosixPath(member.name)
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(member)
            if src is None:
                continue
            with src, target.open("wb") as out:
                shutil.copyfileobj(src, out)
        tops = sorted({PurePosixPath(m.name).parts[0] for m in members})
        for top in tops:
            final = dest / top
            if final.exists():
                _merge(staging / top, final)
            else:
                os.replace(staging / top, final)
    except _READ_ERRORS as exc:
        raise UserError(f"cannot extract {archive} into {dest} ({exc}): the archive may be corrupt, "
                        f"or the folder not writable") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [dest / PurePosixPath(m.name) for m in members]


def _merge(src: Path, dst: Path) -> None:
    """Move src's files into the existing dst tree, replacing files of the same name."""
    if src.is_file():
        os.replace(src, dst)
        return
    dst.mkdir(parents=True, exist_ok=True)
    for child in src.iterdir():
        _merge(child, dst / child.name)
