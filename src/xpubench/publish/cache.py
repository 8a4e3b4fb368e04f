"""The site's digest cache, ``site/.xpubench-cache.json``: what was read of each results file, by the sha256
of its content, so a rebuild reads only the files that are new or changed.

    {"cache_version": 3,
     "records": {sha256: {"machine_label", "host", "chips", "date", "xpubench", "git", "fingerprint",
                          "cases"} or {"error": why it was left out}},
     "stats": {name under the results folder: [size, mtime_ns, sha256]}}

It is published with the site, so it holds nothing local: names are relative to the results folder, and a
record holds what the pages show anyway. It is input like any file: checked as strictly as a results file
(results/validate.py's checks: every field of a run named, every case field of its kind, a case field
the pages do not read a single value, every number finite, JSON no deeper than a record's)
and, when anything in it is off, not used at all (every file is read again); the pages' names and links
come from the digests, never from a field of it.
"""

from __future__ import annotations

import json
from typing import Any

from xpubench.publish.folder import HEX
from xpubench.results.validate import JSON, SCALAR, TEXT, Invalid, list_of, map_of, number, optional, record, whole

CACHE_VERSION = 5   # 3: a strict schema; 4: the rows carry compile_s; 5: and the command that runs the case again
MAX_BYTES = 1 << 30


def _unknown(value: Any, at: str) -> None:
    raise Invalid(f"{at} is not a field of the cache")


def _sha256(value: Any, at: str) -> None:
    if not isinstance(value, str) or not HEX.fullmatch(value):
        raise Invalid(f"{at} must be a sha256 in hex")


def _flag(value: Any, at: str) -> None:
    if not isinstance(value, bool):
        raise Invalid(f"{at} must be true or false")


_TEXT = ("source", "host", "key", "workload", "backend", "device", "device_name", "mode", "precision", "data",
         "status", "message", "started_at", "timing", "figure", "unit", "xpubench", "options", "setting", "rerun")
_NUMBERS = ("time_s", "time_ci95_low_s", "time_ci95_high_s", "value", "flops_per_s", "peak_share", "compile_s")
CASE = record({**dict.fromkeys(_TEXT, TEXT), **dict.fromkeys(_NUMBERS, number()),
               **dict.fromkeys(("batch_size", "size", "users", "devices", "processes", "samples"), whole(0)),
               "rate": number(),
               "noisy": _flag, "process_samples": list_of(list_of(number()))},
              required=("key", "status", "setting"), rest=SCALAR)   # a column rows.py adds later: one value
RUN = record({**dict.fromkeys(("machine_label", "host", "date", "xpubench", "git"), TEXT), "chips": list_of(TEXT),
              "fingerprint": optional(JSON), "cases": list_of(CASE)},
             required=("machine_label", "host", "date", "xpubench", "git", "chips", "cases"), rest=_unknown)
ERROR = record({"error": TEXT}, required=("error",), rest=_unknown)


def check_record(value: Any, at: str) -> None:
    """A record as the site keeps it (a run, or the reason a file was left out); Invalid when it is not."""
    (ERROR if isinstance(value, dict) and "error" in value else RUN)(value, at)


def _stat(value: Any, at: str) -> None:
    if not isinstance(value, list) or len(value) != 3:
        raise Invalid(f"{at} must be [size, mtime_ns, sha256]")
    whole(0)(value[0], at)
    whole(0)(value[1], at)
    _sha256(value[2], at)


def load(data: bytes | None) -> tuple[dict, dict, str]:
    """(records, stats, "") of a cache's bytes; ({}, {}, why) when there is none or it is not valid."""
    if data is None:
        return {}, {}, ""
    try:
        if len(data) > MAX_BYTES:
            raise Invalid(f"larger than {MAX_BYTES >> 20} MiB")
        blob = json.loads(data)
        if not isinstance(blob, dict) or blob.get("cache_version") != CACHE_VERSION:
            raise Invalid("written by another version of xpubench")
        record({"cache_version": whole(0), "records": map_of(check_record), "stats": map_of(_stat)},
               required=("records", "stats"), rest=_unknown)(blob, "cache")
        for sha256 in blob["records"]:
            _sha256(sha256, "a record's key")
    except (ValueError, RecursionError) as exc:   # Invalid and JSON errors are ValueErrors
        return {}, {}, " ".join(str(exc).split())[:200]
    return blob["records"], blob["stats"], ""


def dump(records: dict, stats: dict) -> bytes:
    return json.dumps({"cache_version": CACHE_VERSION, "records": records, "stats": stats},
                      allow_nan=False).encode("ascii")
