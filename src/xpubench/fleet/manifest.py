"""YAML text of plain data (dicts, lists, strings, numbers, true/false), for the Kubernetes manifests and the
SkyPilot task files the fleet writes: block style, every string double-quoted in JSON's escapes (which YAML's
double-quoted scalars read the same), so no value can be taken for a number, a date or a flag."""

from __future__ import annotations

import json
import re
from typing import Any

PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}   # YAML 1.1 reads these as values


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(str(value), ensure_ascii=True)


def _key(key: Any) -> str:
    text = str(key)
    return text if PLAIN_KEY.fullmatch(text) and text.lower() not in YAML_WORDS else _scalar(text)


def _inline(value: Any) -> str:
    return "{}" if isinstance(value, dict) else "[]" if isinstance(value, list) else _scalar(value)


def _nested(value: Any) -> bool:
    return isinstance(value, (dict, list)) and bool(value)


def _lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if not _nested(value):
        return [pad + _inline(value)]
    out = []
    if isinstance(value, dict):
        for key, item in value.items():
            out += [f"{pad}{_key(key)}:", *_lines(item, indent + 2)] if _nested(item) else \
                [f"{pad}{_key(key)}: {_inline(item)}"]
        return out
    for item in value:
        inner = _lines(item, indent + 2)
        out += [f"{pad}- {inner[0].lstrip()}", *inner[1:]]
    return out


def dump(*documents: Any) -> str:
    """One YAML stream of ``documents`` ("---" between them)."""
    return "---\n".join("\n".join(_lines(doc, 0)) + "\n" for doc in documents)
