"""A device id as a value: ``Device.parse("cuda:1")`` -> gpu:1. The one place device spellings are read.

Ids as xpubench writes them: ``cpu`` (JAX's simulated host devices: ``cpu``, ``cpu:1``, ...), ``gpu:N``,
``tpu:N``, ``mps``; N is the index among the backend's devices of that kind. Spellings a user may type
besides: ``gpu`` (= gpu:0), ``cuda[:N]`` and ``rocm[:N]`` (= gpu), ``tpu`` (= tpu:0), ``metal`` (= mps).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KINDS = ("cpu", "gpu", "tpu", "mps")
ALIASES = {"cuda": "gpu", "rocm": "gpu", "hip": "gpu", "metal": "mps"}
_SPELLING = re.compile(r"([a-z]+)(?::(\d+))?")
SPELLINGS = "cpu, gpu, gpu:N, cuda:N, tpu, tpu:N or mps"   # what a user is told to type (errors, -d's help)


@dataclass(frozen=True, order=True)
class Device:
    kind: str           # one of KINDS
    index: int = 0

    @classmethod
    def parse(cls, text: str) -> Device:
        """A spelling -> Device; ValueError for anything else (the caller words the user's error)."""
        m = _SPELLING.fullmatch(str(text).strip().lower())
        kind = ALIASES.get(m.group(1), m.group(1)) if m else None
        if kind not in KINDS:
            raise ValueError(f"unknown device {text!r} (expected {SPELLINGS})")
        index = int(m.group(2) or 0)
        if kind == "mps" and index:
            raise ValueError(f"unknown device {text!r}: there is one mps device, spelled 'mps'")
        return cls(kind, index)

    @property
    def accelerator(self) -> bool:
        return self.kind != "cpu"

    def __str__(self) -> str:
        if self.kind == "mps" or (self.kind == "cpu" and self.index == 0):
            return self.kind
        return f"{self.kind}:{self.index}"


def kind_of(device: str) -> str:
    """'gpu' for 'gpu:1' (and 'cuda:1'); an unreadable spelling is returned as its first word."""
    try:
        return Device.parse(device).kind
    except ValueError:
        word = str(device).split(":")[0].strip().lower()
        return ALIASES.get(word, word)


def is_accelerator(device: str) -> bool:
    """Whether a device spelling ('cpu', 'gpu:0', 'cuda:0', 'tpu', 'mps') names an accelerator."""
    return (kind_of(device) or "cpu") != "cpu"
