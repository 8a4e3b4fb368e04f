"""A device id as a value, and what each kind of device is. The one place device spellings are read
(``Device.parse("cuda:1")`` -> gpu:1, ``spelled``) and device kinds are told apart (``kind_of("gpu:1")``
-> ``GPU``, whose record says ``accelerator``, ``shared``, ...): code elsewhere asks the kind's record and
never compares a device id or a kind with a string ("cpu", "gpu"); tests/test_device_kinds.py fails on a
new comparison outside devices/.

Ids as xpubench writes them: ``cpu`` (JAX's simulated host devices: ``cpu``, ``cpu:1``, ...), ``gpu:N``,
``tpu:N``, ``mps``; N is the index among the backend's devices of that kind. Spellings a user may type
besides: ``gpu`` (= gpu:0), ``cuda[:N]``, ``rocm[:N]`` and ``hip[:N]`` (= gpu), ``tpu`` (= tpu:0),
``metal`` (= mps). A framework's own platform names (JAX's "METAL", "cuda", "rocm") read the same way
(``kind_named``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Kind:
    """A kind of device, and the facts about it the rest of xpubench asks."""

    name: str
    # apart from the host's CPU: its own memory, work queued asynchronously (a timer waits for it; a
    # loop synchronises once per epoch), no address-space cap on its worker, its cases run first
    accelerator: bool
    # N such "devices" are shares of one chip, not N chips (the CPU's cores under JAX's host devices or
    # torch's CPU ranks; a Mac's one GPU): its peak, its price and its energy count once, and scaling
    # over them measures the engine's overhead, not the hardware's
    shared: bool
    indexed: bool = True   # its ids carry an index: gpu:1, tpu:3, JAX's cpu:1 (a Mac has one mps)

    def __str__(self) -> str:
        return self.name


CPU = Kind("cpu", accelerator=False, shared=True)
GPU = Kind("gpu", accelerator=True, shared=False)
TPU = Kind("tpu", accelerator=True, shared=False)
MPS = Kind("mps", accelerator=True, shared=True, indexed=False)
# the machine of a server xpubench only reached by its URL (serve --url): never seen, so neither this host's
# CPU nor an accelerator to recommend; not a spelling a user types (-d names what xpubench runs on)
REMOTE = Kind("remote", accelerator=False, shared=False, indexed=False)
KINDS = {k.name: k for k in (CPU, GPU, TPU, MPS)}
ALIASES = {"cuda": GPU, "rocm": GPU, "hip": GPU, "metal": MPS}
_SPELLING = re.compile(r"([a-z]+)(?::(\d+))?")
SPELLINGS = "cpu, gpu, gpu:N, cuda:N, tpu, tpu:N or mps"   # what a user is told to type (errors, -d's help)


def kind_named(name: str | None) -> Kind | None:
    """The kind a name means ("gpu", "cuda", JAX's platform "METAL" -> MPS), or None."""
    word = str(name or "").strip().lower()
    return KINDS.get(word) or ALIASES.get(word)


def spelled(text: str) -> tuple[Kind, int | None]:
    """A spelling -> (its kind, the index written or None: "gpu" names the kind, "gpu:1" one device);
    ValueError for anything else (the caller words the user's error)."""
    m = _SPELLING.fullmatch(str(text).strip().lower())
    kind = kind_named(m.group(1)) if m else None
    if kind is None:
        raise ValueError(f"unknown device {text!r} (expected {SPELLINGS})")
    index = None if m.group(2) is None else int(m.group(2))
    if not kind.indexed and index:
        raise ValueError(f"unknown device {text!r}: there is one {kind} device, spelled {kind.name!r}")
    return kind, index


@dataclass(frozen=True, order=True)
class Device:
    kind: Kind
    index: int = 0

    @classmethod
    def parse(cls, text: str) -> Device:
        """A spelling -> Device; ValueError for anything else (the caller words the user's error)."""
        kind, index = spelled(text)
        return cls(kind, index or 0)

    @property
    def accelerator(self) -> bool:
        return self.kind.accelerator

    def __str__(self) -> str:
        if not self.kind.indexed or (self.kind is CPU and self.index == 0):
            return self.kind.name
        return f"{self.kind}:{self.index}"


def kind_of(device: str) -> Kind:
    """The kind of a device id or spelling ('gpu:1', 'cuda:1' -> GPU; '' -> CPU). A kind this version does
    not know (a record of a newer one) is an accelerator of that name."""
    word = str(device or "cpu").split(":")[0].strip().lower()
    return kind_named(word) or (REMOTE if word == REMOTE.name else Kind(word, accelerator=True, shared=False))


def is_accelerator(device: str) -> bool:
    """Whether a device spelling ('cpu', 'gpu:0', 'cuda:0', 'tpu', 'mps') names an accelerator."""
    return kind_of(device).accelerator


def is_cpu(device: str) -> bool:
    """Whether a device id names this host's CPU (not an accelerator, not a remote server's machine)."""
    return kind_of(device) is CPU


def device_id(kind: Kind | str, index: int = 0) -> str:
    """The id xpubench writes for the ``index``-th device of a kind (a framework's platform name too):
    (GPU, 1) -> "gpu:1", (CPU, 0) -> "cpu", ("METAL", 0) -> "mps"."""
    known = kind if isinstance(kind, Kind) else kind_of(kind)
    return str(Device(known, index))
