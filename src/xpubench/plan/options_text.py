"""Text -> value for the options of `xpubench run` (options.py): numbers, comma lists, sizes, device
counts, prices. Each parser only turns text into a value, with a one-line error when the text is not
one (argparse.ArgumentTypeError: argparse words it as "argument --flag: ..."). Whether a value is
acceptable (above 0, a known name, ...) is decided once, by plan.validation.validate or api.check_run_settings.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from xpubench import readfile
from xpubench.errors import UserError

MAX_TEXT = readfile.MiB   # a config or prices file


def csv(kind, name: str):
    """A comma-separated list of ``kind`` (str, int); refuses a list with nothing in it."""
    def parse(text: str) -> list:
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"empty {name} list: nothing to run")
        try:
            return [kind(t) for t in items]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} must be a comma-separated list of numbers: {text!r}") from None
    return parse


def whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None


def parse_size(text) -> int:
    """'8G', '512M', '1.5g', '4096' (bytes; a whole number from a TOML file too) -> bytes."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    t = str(text).strip().lower().removesuffix("ib").rstrip("b")
    try:
        value = float(t[:-1]) * units[t[-1]] if t and t[-1] in units else float(t)
    except ValueError:
        value = math.nan
    if isinstance(text, bool) or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a memory size: {text!r} (try 4G or 512M)")
    return int(value)


def device_count(text) -> list[int]:
    """--devices N or 'all' -> [N] or [0] (0: every device); N a whole number of at least 1."""
    if str(text).strip() == "all":
        return [0]
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    elif isinstance(text, str) and text.strip().isdigit():
        value = int(text)
    else:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, or 'all'; got {text!r}")
    return [value]


def text():
    """A TOML value that must be a string (a file or folder name)."""
    def parse(value) -> str:
        if not isinstance(value, str):
            raise argparse.ArgumentTypeError(f"must be a file name, got {value!r}")
        return value
    return parse


def table():
    """A TOML value that must be a table (name = value)."""
    def parse(value) -> dict:
        if not isinstance(value, dict):
            raise argparse.ArgumentTypeError(f"must be a table of name = value, got {value!r}")
        return dict(value)
    return parse


def price(text: str) -> tuple[str, float]:
    """'gpu=2.50' -> ('gpu', 2.5): a device and its US dollars per hour."""
    device, sep, usd = text.partition("=")
    if not sep or not device.strip():
        raise argparse.ArgumentTypeError(f"give DEVICE=USD_PER_HOUR, e.g. gpu=2.50; got {text!r}")
    try:
        return device.strip(), float(usd)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{device.strip()}: not a price in US dollars per hour: {usd!r}") from None


class KeyValues(argparse.Action):
    """A repeatable KEY=VALUE flag collected into one dict (the type gives the (key, value) pairs)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, {**(getattr(namespace, self.dest) or {}), values[0]: values[1]})


def prices(value) -> dict:
    """--prices FILE (TOML or JSON: device = USD per hour), or the same table written in a TOML config."""
    if isinstance(value, dict):
        return dict(value)
    if not isinstance(value, str):
        raise argparse.ArgumentTypeError(f"must be a table (device = USD per hour) or a file, got {value!r}")
    path = Path(value).expanduser()
    try:
        content = readfile.read_text(path, "prices file", MAX_TEXT)
        if path.suffix.lower() == ".json":
            data = readfile.loads_json(content, f"prices file {value}")
        else:
            data = readfile.loads_toml(content, f"prices file {value}")
    except UserError as exc:   # missing, not a regular file, too large, not UTF-8, not JSON / TOML
        raise argparse.ArgumentTypeError(str(exc)) from None
    if isinstance(data, dict) and isinstance(data.get("prices"), dict):
        data = data["prices"]
    if not isinstance(data, dict):
        raise argparse.ArgumentTypeError(f"prices file {value} must hold a table of device = USD per hour")
    return data


def read_toml(path: str, what: str) -> dict:
    """A TOML file -> dict; a missing, binary, unreadable, oversized or malformed file, or one that is not
    a regular file (a FIFO, a device), is one line (readfile.py)."""
    text = readfile.read_text(path, what, MAX_TEXT, hint=": give a TOML file")
    return readfile.loads_toml(text, f"{what} {path}")
