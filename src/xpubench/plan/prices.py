"""The price each planned case carries (``priced``), from the prices per device-hour the run was given
(``--price-per-hour DEVICE=USD`` and ``--prices FILE``, read by plan/options_text.py and checked by the
planner); the dollars per result they give are analysis/cost.py's.

Prices are US dollars per device per hour, as the user pays them (a cloud instance's price is the
price of the device it is rented for). Device spellings: ``cpu``, ``gpu``, ``gpu:N`` (``cuda``,
``cuda:N``, ``rocm:N`` are the same), ``tpu``, ``tpu:N``, ``mps``. A bare kind (``gpu``) prices every
device of that kind; an indexed one (``gpu:1``) overrides it for that device. A case on several
devices costs the sum of their prices. One device priced under two spellings (``gpu`` and ``cuda``)
is refused: which price would count is not for the planner to guess. Bad input raises ``UserError``
with one line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import replace

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
        price = float(str(value).strip()) if not isinstance(value, bool) else math.nan
    except ValueError:
        price = math.nan
    if not math.isfinite(price) or price < 0:
        raise UserError(f"{where}: the price must be a number of US dollars per hour, at least 0; got {value!r}")
    return price


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
        given, prices = prices, {}
        for device, usd in given.items():
            key = normalise_device(str(device))
            if key in prices:
                twice = [str(d) for d in given if normalise_device(str(d)) == key]
                raise UserError(f"prices: {key} is priced twice ({' and '.join(twice)})")
            prices[key] = _price(usd, f"price of {device}")
    out = []
    for case in cases:
        price = price_for_case(prices, case.device, case.devices)
        out.append(case if price is None else replace(case, options=case.options.replace(price_per_hour=price)))
    return out
