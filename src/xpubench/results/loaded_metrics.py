"""A loaded result's figures, typed (schema version 3, results/schema.py): one dataclass per mode, its
mode's figures (results/modes.py: ``TrainMetrics``...) with every shared group's (efficiency, scaling, the
worker processes, energy, cost, a user's model, time to target: ``metrics.SHARED``), so a reader writes
``result.metrics.step_s`` and gets a float or None, and ``result.metrics.global_batch`` an int or None.

It is also the flat mapping the line holds (after optimum-benchmark's typed measurements, which cross the
process boundary as dicts and come back typed): ``metrics["step_s"]``, ``.get``, ``.items()`` give the
figures that were recorded or derived, in that order (a declared figure nobody gave is None as an
attribute and absent as a key: "n/a", never 0); the folding (results/fold.py) and the derived figures
(analysis/) set them by name. A name this mode's dataclass does not declare (another version's figure)
is kept as given in ``extra``. A whole number declared ``int`` and written as ``256.0`` reads as 256.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, ClassVar

from xpubench.results.metrics import SHARED, Metrics
from xpubench.results.metrics_common import Common
from xpubench.results.modes import mode_of


class LoadedMetrics(MutableMapping):
    """The mapping side of every mode's loaded figures (``loaded_class``): the names given, in order."""

    MODE: ClassVar[str | None] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra", {})
        object.__setattr__(self, "_given", [n for n in declared(type(self)) if getattr(self, n) is not None])

    def __setattr__(self, name: str, value: Any) -> None:
        kind = declared(type(self)).get(name)
        if kind is None:
            raise AttributeError(f"{type(self).__name__} declares no figure {name!r}")
        object.__setattr__(self, name, _typed(value, kind))
        given = self.__dict__.get("_given")
        if given is not None and name not in given:
            given.append(name)

    def __getitem__(self, name: str) -> Any:
        if name in self.extra:
            return self.extra[name]
        if name in self._given:
            return getattr(self, name)
        raise KeyError(name)

    def __setitem__(self, name: str, value: Any) -> None:
        if name in declared(type(self)):
            setattr(self, name, value)
            return
        self.extra[name] = value
        if name not in self._given:
            self._given.append(name)

    def __delitem__(self, name: str) -> None:
        if name not in self._given:
            raise KeyError(name)
        self._given.remove(name)
        if name in self.extra:
            del self.extra[name]
        else:
            object.__setattr__(self, name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._given))

    def __len__(self) -> int:
        return len(self._given)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self) == dict(other)

    __hash__ = None   # mutable, like the dict it stands for

    def __reduce__(self):   # a class made per mode: pickled (publish/collect's workers) as its mode and figures
        return loaded_metrics, (self.MODE, dict(self))


@functools.cache
def declared(cls: type) -> dict[str, type]:
    """{figure: int, float, bool or str} of a loaded class (its fields' declared types)."""
    kinds = {"int": int, "float": float, "bool": bool, "str": str}
    return {f.name: kinds.get(str(f.type).split("|")[0].strip(), object) for f in dataclasses.fields(cls)}


def _typed(value: Any, kind: type) -> Any:
    """A whole number written as a float (``256.0``) as the ``int`` it was declared; anything else as given
    (the record's check, results/validate.py, already refused a value of the wrong kind)."""
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


@functools.cache
def loaded_class(mode_name: str | None) -> type[LoadedMetrics]:
    """The loaded dataclass of a mode: its metrics dataclass with every shared group; a mode no record
    declares (a file of a newer version) gets the figures every case may carry (``Common``) and the groups."""
    mode = mode_of(mode_name)
    own: type[Metrics] = mode.metrics if mode else Common
    groups = tuple(g for g in dict.fromkeys((own, *SHARED)) if not issubclass(own, g) or g is own)
    cls = type(f"Loaded{own.__name__}", (LoadedMetrics, *groups), {"__module__": __name__, "MODE": mode_name})
    return dataclasses.dataclass(cls, eq=False, repr=False)


def loaded_metrics(mode_name: str | None, figures: Mapping[str, Any]) -> LoadedMetrics:
    """``figures`` (a record's flat metrics) as its mode's loaded dataclass, in the same order."""
    typed = loaded_class(mode_name)()
    for name, value in figures.items():
        typed[name] = value
    return typed
