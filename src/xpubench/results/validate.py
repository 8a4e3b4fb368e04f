"""What each field of a results record may hold, checked when a file is loaded, so that no report,
comparison or resume ever meets a string where a number belongs, a negative time, a number too large
for a float, or free-form JSON nested deeper than any record xpubench writes.

The schema is declarative: small checks (``number``, ``whole``, ``TEXT``, ``optional``, ``list_of``,
``map_of``, ``record``) composed into ``RUN``, one line per field. A metric's check comes from its unit in
results/metrics.py's registry (the one place a figure is declared): ``text`` a string, ``flag`` true/false, every
other unit a finite number (times, rates, bytes, FLOPs, energy and money never below 0); a metric name
this version does not declare may hold any single value (a string, a number, true/false). Every value
may be null (n/a) unless the schema says otherwise. Fields the reports never read (most of the
fingerprint, a case's options) may hold any JSON up to ``MAX_DEPTH`` levels.

Why not jsonschema or pydantic: the metric checks are derived from the metrics registry at import
time, the whole schema is about 100 lines, and neither library is a dependency of xpubench already.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from xpubench.results.metrics import REGISTRY
from xpubench.results.modes import mode_of

MAX_DEPTH = 24            # free-form JSON inside a record (fingerprints are about 6 levels deep)
LARGEST = 1e100           # no figure comes near (FLOP/s ~1e18): squares and products of figures stay finite
SHORTEST_S = 1e-9         # a raw sample or a headline time: no finished work takes less than a nanosecond
LARGEST_WHOLE = 2 ** 63   # JSON's interoperable integers; a batch size, a byte count, a count
NON_NEGATIVE_UNITS = ("s", "us", "1/s", "FLOP", "FLOP/s", "FLOP/B", "B", "B/s", "J", "W", "USD")

Check = Callable[[Any, str], None]


class Invalid(ValueError):
    """A value the schema refuses; the message names the field (``metrics.step_s``) and what it must be."""


def _shown(value: Any) -> str:
    text = (repr(value) if not isinstance(value, (dict, list))
            else f"a JSON {'object' if isinstance(value, dict) else 'list'}")
    return text if len(text) <= 40 else text[:37] + "..."


def _fail(at: str, expected: str, value: Any) -> None:
    raise Invalid(f"{at} must be {expected}, got {_shown(value)}")


def number(least: float | None = None, most: float | None = None) -> Check:
    expected = "a number" + (f" of at least {least:g}" if least is not None else "") + (
        f" of at most {most:g}" if most is not None else "")

    def check(value: Any, at: str) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            _fail(at, expected, value)
        try:
            as_float = float(value)
        except OverflowError:
            _fail(at, "a number a float can hold", value)
        if not math.isfinite(as_float) or abs(as_float) > LARGEST:
            _fail(at, f"a finite number of at most {LARGEST:g} in size", value)
        if (least is not None and value < least) or (most is not None and value > most):
            _fail(at, expected, value)
    return check


def whole(least: int = 0, most: int | None = None) -> Check:
    expected = f"a whole number of at least {least} and at most {LARGEST_WHOLE - 1 if most is None else most}"

    def check(value: Any, at: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value < LARGEST_WHOLE \
                or (most is not None and value > most):
            _fail(at, expected, value)
    return check


def TEXT(value: Any, at: str) -> None:
    if not isinstance(value, str):
        _fail(at, "text", value)


def FLAG(value: Any, at: str) -> None:
    if not isinstance(value, bool):
        _fail(at, "true or false", value)


def SCALAR(value: Any, at: str) -> None:
    """One JSON value that is not a list or an object (null included)."""
    if value is None or isinstance(value, (str, bool)):
        return
    number()(value, at)


def optional(check: Check) -> Check:
    def maybe(value: Any, at: str) -> None:
        if value is not None:
            check(value, at)
    return maybe


def one_of(*allowed: str) -> Check:
    def check(value: Any, at: str) -> None:
        if value not in allowed:
            _fail(at, "one of " + ", ".join(allowed), value)
    return check


def _container(check: Check) -> Check:
    """Mark a check of a list or an object: such a field is absent or a value, never null (code reads it
    with ``.get(name, {})``)."""
    check.container = True
    return check


def list_of(item: Check) -> Check:
    def check(value: Any, at: str) -> None:
        if not isinstance(value, list):
            _fail(at, "a list", value)
        for i, v in enumerate(value):
            item(v, f"{at}[{i}]")
    return _container(check)


def map_of(item: Check) -> Check:
    def check(value: Any, at: str) -> None:
        if not isinstance(value, dict):
            _fail(at, "a JSON object", value)
        for k, v in value.items():
            item(v, f"{at}.{k}")
    return _container(check)


def JSON(value: Any, at: str, depth: int = 0) -> None:
    """Any JSON value of at most MAX_DEPTH levels, its numbers finite."""
    if depth > MAX_DEPTH:
        raise Invalid(f"{at} is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, dict):
        for k, v in value.items():
            JSON(v, f"{at}.{k}", depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            JSON(v, f"{at}[{i}]", depth + 1)
    else:
        SCALAR(value, at)


def record(fields: dict[str, Check], *, required: tuple[str, ...] = (), not_null: tuple[str, ...] = (),
           rest: Check = JSON) -> Check:
    """A JSON object whose named fields pass their checks, the others ``rest``. A field may be null (n/a)
    or absent, except a ``required`` one (present, not null), a ``not_null`` one and a list or object
    field (absent, or a value)."""
    never_null = set(not_null) | {k for k, c in fields.items() if getattr(c, "container", False)}

    def check(value: Any, at: str) -> None:
        if not isinstance(value, dict):
            _fail(at, "a JSON object", value)
        for name in required:
            if value.get(name) is None:
                raise Invalid(f"{at}.{name} is missing")
        for k, v in value.items():
            if v is not None:
                fields.get(k, rest)(v, f"{at}.{k}")
            elif k in never_null:
                raise Invalid(f"{at}.{k} must not be null")
    return _container(check)


def _metric_check(unit: str) -> Check:
    if unit == "text":
        return TEXT
    if unit == "flag":
        return FLAG
    return number(0 if unit in NON_NEGATIVE_UNITS else None)


METRICS = record({name: _metric_check(m.unit) for name, m in REGISTRY.items()}, rest=SCALAR)
SECONDS = list_of(optional(number(SHORTEST_S)))   # raw samples: times of finished work
PIXEL = whole(0, 255)   # 8-bit pixels, as the gallery keeps them


def IMAGE(value: Any, at: str) -> None:
    """A gallery image: rows of pixels (grey) or of [r, g, b] lists, every row as long as the first."""
    list_of(list_of(lambda v, a: (list_of(PIXEL) if isinstance(v, list) else PIXEL)(v, a)))(value, at)
    if not value or any(len(row) != len(value[0]) for row in value) or not value[0]:
        raise Invalid(f"{at} must be a non-empty rectangle of pixels")
    cells = [p for row in value for p in row]
    if any(isinstance(p, list) != isinstance(cells[0], list) or (isinstance(p, list) and len(p) != len(cells[0]))
           for p in cells):
        raise Invalid(f"{at} must hold pixels of one kind")


GALLERY = list_of(record({"index": whole(0), "label": whole(0), "pred": whole(0), "confidence": number(0, 1),
                          "correct": FLAG, "image": IMAGE},
                         not_null=("label", "pred", "confidence", "image")))   # what the chart draws
DEVICE = record({"id": TEXT, "kind": TEXT, "name": TEXT, "vendor": TEXT, "driver": SCALAR,
                 "compute_capability": SCALAR, "memory_bytes": whole(0), "memory_bandwidth": number(0),
                 "peak_flops": map_of(optional(number(0))), "peak_is_estimate": FLAG, "peak_source": TEXT})
BACKEND = record({"installed": FLAG, "devices": list_of(DEVICE), "version": SCALAR, "blas": SCALAR,
                  "cuda_version": SCALAR, "cudnn_version": SCALAR, "hip_version": SCALAR, "platform": SCALAR,
                  "error": SCALAR})
CPU = record({"model": TEXT, "usable_cores": whole(0), "logical_cores": whole(0), "memory_bytes": whole(0),
              "peak_estimate": map_of(record({"value": number(0), "basis": TEXT}))})
CEILING = record({"flops_per_s": number(0), "rel_noise": number(0), "shape": list_of(whole(1)), "written": SCALAR,
                  "source": TEXT, "warning": TEXT})
CEILINGS = record({"ceilings": map_of(CEILING), "bandwidth": map_of(record({"bytes_per_s": number(0),
                                                                              "written": SCALAR, "source": TEXT})),
                   "missing": list_of(SCALAR), "note": TEXT})
FINGERPRINT = record({
    "hostname": SCALAR, "platform": SCALAR, "python": SCALAR, "xpubench": SCALAR, "git": SCALAR, "time": SCALAR,
    "host": record({"hostname": SCALAR, "os": SCALAR, "python": SCALAR, "memory_bytes": whole(0), "cpu": CPU}),
    "backends": map_of(BACKEND), "packages": map_of(SCALAR), "env": map_of(SCALAR),
    "cpu_busy_at_start": number(0, 1), "ceilings": CEILINGS,
    # the [[machine]] entry of `xpubench fleet` that ran it (fleet/file.py Machine.record)
    "fleet_machine": record({"name": TEXT, "engine": TEXT, "settings": map_of(JSON), "nodes": whole(1),
                             "ntasks": whole(1)}, required=("name", "engine"))})
CASE = record({
    "workload": TEXT, "backend": TEXT, "device": TEXT, "mode": TEXT, "precision": TEXT, "key": TEXT, "run_id": TEXT,
    "batch_size": whole(1), "size": whole(1), "users": whole(1), "rate": number(0), "devices": whole(1),
    "epochs": whole(1), "steps": whole(1), "train_samples": whole(1), "eval_samples": whole(1),
    "time_budget_s": number(0), "data": TEXT, "data_dir": TEXT, "compile": TEXT, "seed": whole(-LARGEST_WHOLE),
    "options": record({"price_per_hour": number(0), "model": TEXT, "model_file": TEXT, "model_sha256": TEXT})},
    required=("workload", "backend", "device", "mode", "precision", "key"))
RUN = record({
    "case": CASE, "status": TEXT, "message": TEXT, "metrics": METRICS, "samples": map_of(SECONDS),
    "series": map_of(list_of(optional(number()))), "artifacts": record({"gallery": GALLERY}),
    "placement": TEXT, "fingerprint": FINGERPRINT, "started_at": TEXT, "duration_s": number(0),
    "process": whole(0), "processes": whole(1), "machine": map_of(optional(number())), "schema_version": whole(1)},
    required=("case", "status"), not_null=("message", "started_at", "process", "processes"))


def check_case(case: dict, at: str = "case") -> None:
    """CASE, and the size a case of its mode is measured at (``Mode.size``, results/modes.py; the selftest
    excepted: it measures nothing)."""
    CASE(case, at)
    mode = mode_of(case["mode"])
    size = mode.size if mode else None
    if size and case["workload"] != "selftest" and case.get(size) is None:
        raise Invalid(f"{at}.{size} is missing (a {case['mode']} case)")


def check_run(record_: dict) -> None:
    """Invalid (naming the first bad field) unless ``record_`` (a decoded, migrated line) fits RUN, its
    case ``check_case``, and an ok result of a measured mode carries its headline time (``Mode.samples``, at
    least SHORTEST_S: the harness writes it; reports rank and divide by it)."""
    RUN(record_, "record")
    check_case(record_["case"], "record.case")
    if record_.get("process", 0) >= record_.get("processes", 1):
        raise Invalid(f"record.process {record_.get('process')!r} is not below record.processes "
                      f"{record_.get('processes')!r}")
    case, metrics = record_["case"], record_.get("metrics") or {}
    mode = mode_of(case["mode"])
    names = mode.samples if mode else ()
    if record_["status"] == "ok" and case["workload"] != "selftest" and names:
        given = [n for n in names if metrics.get(n) is not None] or list(names)
        number(SHORTEST_S)(metrics.get(given[0]), f"record.metrics.{given[0]} (the time of an ok {case['mode']} "
                                                   "result)")
