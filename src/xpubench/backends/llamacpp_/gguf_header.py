"""A GGUF file read safely: its header walked and checked before gguf-py's reader makes anything of it.

gguf-py trusts the header: a count of 2**60 loops (and allocates) until memory runs out, a string or array
longer than the file reads past its end (an IndexError), a bad key an UnicodeDecodeError. ``read`` hands a
file to ``gguf.GGUFReader`` only after ``check`` walked its header (GGUF v2 and v3, either byte order):

- the magic, the version, the tensor and metadata counts;
- each metadata pair: the key (a string: a u64 length and UTF-8 bytes, unique), the value's type, the value
  (a scalar, a string, or an array: its item type, a u64 count, the items; arrays nested at most
  ``MAX_NESTING`` deep); ``general.alignment`` a u32 power of two;
- each tensor's information: its name (unique), at most ``MAX_DIMS`` dimensions, a known GGML type, and its
  data (the dimensions' product in that type's blocks) inside the file.

Every count and length is compared with the bytes left in the file before it is used: a count is at most
the bytes left over the smallest size an item can have. Any problem is one line (a UserError), naming the
byte where it was found.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

from xpubench import readfile
from xpubench.errors import UserError

MAX_DIMS = 4            # GGML_MAX_DIMS
MAX_NESTING = 8         # arrays of arrays (GGUF writers nest none)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_LEAST = {**{t: struct.calcsize(c) for t, c in _SCALARS.items()}, _STRING: 8, _ARRAY: 12}   # an item's least bytes


class _Bad(Exception):
    pass


class _Walk:
    def __init__(self, data, order: str) -> None:
        self.data, self.order, self.at = data, order, 0

    def left(self) -> int:
        return len(self.data) - self.at

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if size > self.left():
            raise _Bad(f"the file ends at byte {len(self.data)}, inside a {size}-byte field at byte {self.at}")
        value = struct.unpack_from(self.order + fmt, self.data, self.at)[0]
        self.at += size
        return value

    def count(self, what: str, least: int) -> int:
        n, at = self.take("Q"), self.at
        if n * least > self.left():
            raise _Bad(f"{what} of {n:,} at byte {at - 8}: more than the {self.left():,} bytes left could hold")
        return n

    def text(self, what: str) -> str:
        n = self.count(f"{what}: a length", 1)
        raw = bytes(self.data[self.at:self.at + n])
        self.at += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _Bad(f"{what} at byte {self.at - n} is not UTF-8") from None

    def unique(self, what: str, seen: set[str]) -> str:
        """A string (``text``) not in ``seen``, added to it."""
        name = self.text(what)
        if name in seen:
            raise _Bad(f"{what} {name!r} appears twice")
        seen.add(name)
        return name

    def value(self, kind: int, key: str, depth: int = 0):
        if kind in _SCALARS:
            return self.take(_SCALARS[kind])
        if kind == _STRING:
            n = self.count(f"{key}: a string length", 1)
            self.at += n
            return None
        if kind != _ARRAY:
            raise _Bad(f"{key}: unknown value type {kind} at byte {self.at - 4}")
        if depth >= MAX_NESTING:
            raise _Bad(f"{key}: arrays nested more than {MAX_NESTING} deep")
        item = self.take("I")
        if item not in _LEAST:
            raise _Bad(f"{key}: unknown array item type {item} at byte {self.at - 4}")
        n = self.count(f"{key}: an array", _LEAST[item])
        if item in _SCALARS:
            self.at += n * _LEAST[item]
        else:
            for _ in range(n):
                self.value(item, key, depth + 1)
        return None


def _walk(data) -> None:
    import gguf

    if data[:4] != b"GGUF" or len(data) < 8:
        raise _Bad("no GGUF magic and version at its start")
    order = "<" if struct.unpack_from("<I", data, 4)[0] & 0xFFFF else ">"
    w = _Walk(data, order)
    w.at = 4
    version = w.take("I")
    if version not in gguf.READER_SUPPORTED_VERSIONS:
        known = ", ".join(map(str, gguf.READER_SUPPORTED_VERSIONS))
        raise _Bad(f"GGUF version {version}; this reader knows {known}")
    tensors, pairs = w.count("a tensor count", 8 + 4 + 4 + 8), w.count("a metadata count", 8 + 4 + 1)
    keys, alignment = set(), gguf.GGUF_DEFAULT_ALIGNMENT
    for i in range(pairs):
        key = w.unique(f"metadata key {i}", keys)
        kind = w.take("I")
        value = w.value(kind, repr(key))
        if key == "general.alignment" and (kind != 4 or not value or value & (value - 1)):
            raise _Bad(f"general.alignment must be a u32 power of two, got {value!r} of type {kind}")
        alignment = value if key == "general.alignment" else alignment
    names, extents = set(), []
    for i in range(tensors):
        name = w.unique(f"tensor name {i}", names)
        n_dims = w.take("I")
        if n_dims > MAX_DIMS:
            raise _Bad(f"tensor {name!r} has {n_dims:,} dimensions (at most {MAX_DIMS})")
        dims = [w.take("Q") for _ in range(n_dims)]
        kind, offset = w.take("I"), w.take("Q")
        if kind not in {t.value for t in gguf.GGML_QUANT_SIZES}:
            raise _Bad(f"tensor {name!r} has an unknown GGML type {kind}")
        block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(kind)]
        if dims and dims[0] % block:
            raise _Bad(f"tensor {name!r}: its first dimension {dims[0]:,} is not a whole number of {block}-weight "
                       "blocks")
        elements = 1
        for d in dims:
            elements *= d
        extents.append((name, offset, elements * size // block))
    start = w.at + (-w.at) % alignment
    for name, offset, nbytes in extents:
        if start + offset + nbytes > len(data):
            raise _Bad(f"tensor {name!r}: its {nbytes:,} bytes at byte {start + offset:,} run past the end of the "
                       f"file ({len(data):,} bytes)")


def check(path: Path | str, what: str) -> None:
    """One line (UserError) on anything wrong in ``path``'s GGUF header (module docstring)."""
    with readfile.open_regular(path, what) as fh:
        try:
            data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:           # an empty file cannot be mapped
            raise UserError(f"{what} {path}: not a GGUF file (it is empty)") from None
        with data:
            try:
                _walk(data)
            except _Bad as exc:
                raise UserError(f"{what} {path}: not a readable GGUF file ({exc})") from None


def read(path: Path | str, what: str):
    """``gguf.GGUFReader`` of ``path``, its header checked first (``check``)."""
    import gguf

    check(path, what)
    try:
        return gguf.GGUFReader(str(path))
    except (OSError, ValueError, KeyError, IndexError, UnicodeDecodeError) as exc:   # what check did not foresee
        raise UserError(f"{what} {path}: not a readable GGUF file ({' '.join(str(exc).split())[:120]})") from None
