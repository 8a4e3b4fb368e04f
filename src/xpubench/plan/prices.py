"""Prices per device-hour, from ``--price-per-hour DEVICE=USD`` flags or a TOML prices file, and the
price each planned case carries (``priced``); the dollars per result they give are analysis/cost.py's.

Prices are US dollars per device per hour, as the user pays them (a cloud instance's price is the
price of the device it is rented for). Device spellings: ``cpu``, ``gpu``, ``gpu:N`` (``cuda``,
``cuda:N``, ``rocm:N`` are the same), ``tpu``, ``tpu:N``, ``mps``. A bare kind (``gpu``) prices every
device of that kind; an indexed one (``gpu:1``) overrides it for that device. A case on several
devices costs the sum of their prices.

Prices file::

    [prices]            # USD per device-hour
    cpu = 0.10
    gpu = 2.50
    "gpu:1" = 1.20

(The ``[prices]`` header may be left out.) Bad input raises ``UserError`` with one line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from xpubench.errors import UserError

_DEVICE = re.compile(r"(cpu|gpu|cuda|rocm|tpu|mps)(?::(\d+))?")
_KIND = {"cuda": "gpu", "rocm": "gpu"}


def normalise_device(text: str) -> str:
    """'CUDA:0' -> 'gpu:0', 'gpu' -> 'gpu'; raises UserError for anything else."""
    m = _DEVICE.fullmatch(text.strip().lower())
    if not m or (m.group(1) in ("cpu", "mps") and m.group(2) not in (None, "0")):
        raise UserError(f"unknown device {text.strip()!r} in a price (expected cpu, gpu, gpu:N, tpu, tpu:N or mps)")
    kind = _KIND.get(m.group(1), m.group(1))
    return kind if m.group(2) is None or kind in ("cpu", "mps") else f"{kind}:{int(m.group(2))}"


def _price(value: object, where: str) -> float:
    try:
        price = float(str(value).strip().lstrip("$")) if not isinstance(value, bool) else math.nan
    except ValueError:
        price = math.nan
    if not math.isfinite(price) or price < 0:
        raise UserError(f"{where}: the price must be a number of US dollars per hour, at least 0; got {value!r}")
    return price


def parse_price_flags(values: Iterable[str]) -> dict[str, float]:
    """``["cpu=0.10", "gpu:0=2.5"]`` -> {"cpu": 0.1, "gpu:0": 2.5}; the same device twice is an error."""
    prices: dict[str, float] = {}
    for text in values:
        device, sep, amount = text.partition("=")
        if not sep or not device.strip() or not amount.strip():
            raise UserError(f"--price-per-hour {text!r}: expected DEVICE=USD, e.g. cpu=0.10 or gpu:0=2.50")
        key = normalise_device(device)
        if key in prices:
            raise UserError(f"--price-per-hour: {key} is priced twice")
        prices[key] = _price(amount, f"--price-per-hour {text!r}")
    return prices


def load_prices_file(path: str | Path) -> dict[str, float]:
    """Prices from a TOML file (see the module docstring)."""
    from xpubench import readfile

    p = Path(path)
    try:
        data = readfile.loads_toml(readfile.read_text(p, "prices file", readfile.MiB), f"prices file {p}")
    except readfile.FileProblem as exc:
        raise UserError(str(exc) if exc.reason == "does not exist" else f"prices file {p} is unreadable: it "
                        f"{exc.reason}") from None
    table = data.get("prices", data)
    if not isinstance(table, dict) or not table:
        raise UserError(f"prices file {p}: expected a [prices] table of DEVICE = USD per hour")
    prices: dict[str, float] = {}
    for device, amount in table.items():
        key = normalise_device(device)
        if key in prices:
            raise UserError(f"prices file {p}: {key} is priced twice")
        prices[key] = _price(amount, f"prices file {p}, {device}")
    return prices


def merge_prices(file_prices: Mapping[str, float] | None, flag_prices: Mapping[str, float] | None) -> dict[str, float]:
    """The file's prices with the flags' on top (a flag wins for the same device)."""
    return {**(file_prices or {}), **(flag_prices or {})}


def price_for(prices: Mapping[str, float], device: str, devices: int = 1) -> float | None:
    """USD per hour of a case on ``devices`` devices starting at ``device`` ('gpu:0' x 2 = gpu:0 + gpu:1),
    or None when any of them has no price."""
    key = normalise_device(device)
    kind, _, index = key.partition(":")
    total = 0.0
    for i in range(devices):
        one = f"{kind}:{int(index or 0) + i}" if kind not in ("cpu", "mps") else kind
        price = prices.get(one, prices.get(kind))
        if price is None:
            return None
        total += price if kind not in ("cpu", "mps") or i == 0 else 0.0   # CPU "devices" share one CPU
    return total


def price_for_case(prices: Mapping[str, float] | None, device: str, devices: int = 1) -> float | None:
    """The price per hour of a case on ``devices`` devices from ``device``: the exact id ("gpu:1") first,
    then its kind ("gpu"); None when no price matches (or none was given)."""
    return price_for(prices, device, devices or 1) if prices else None


def priced(cases: list, prices: Mapping[str, float] | None) -> list:
    """The plan's cases with ``options["price_per_hour"]`` set where a price matches their device(s)
    (plan.build_cases: the one hook). Cases without a matching price are returned as they are."""
    if prices:
        if not isinstance(prices, Mapping):
            raise UserError(f"prices must be a table of DEVICE = USD per hour, got {prices!r}")
        prices = {normalise_device(str(k)): _price(v, f"price of {k}") for k, v in prices.items()}
    out = []
    for case in cases:
        price = price_for_case(prices, case.device, case.devices)
        out.append(case if price is None else replace(case, options=case.options.replace(price_per_hour=price)))
    return out
