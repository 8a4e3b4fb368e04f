"""The prices a run was given, checked once (``checked``: plan.validation.validate) and carried by each planned case
(``priced``); the dollars per result they give are analysis/cost.py's. The flags' and files' text is
read by plan/options_text.py (``--price-per-hour DEVICE=USD``, ``--prices FILE``).

Prices are US dollars per device per hour, as the user pays them (a cloud instance's price is the
price of the device it is rented for). A price's device is any spelling devices/device.py reads:
``cpu``, ``gpu``, ``gpu:N`` (``cuda``, ``rocm``, ``hip`` are gpu), ``tpu``, ``tpu:N``, ``mps``
(``metal``). A bare kind (``gpu``) prices every device of that kind; an indexed one (``gpu:1``)
overrides it for that device. A case on several devices costs the sum of their prices, but devices that
share one chip (CPU "devices": JAX's host devices, torch's CPU ranks) are priced once. One device
priced under two spellings (``gpu`` and ``cuda``) is refused: which price would count is not for the
planner to guess. Bad input raises ``UserError`` with one line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from xpubench.devices.device import Device, spelled
from xpubench.errors import UserError


def normalise_device(text: str) -> str:
    """A price's device: 'CUDA:0' -> 'gpu:0', 'gpu' -> 'gpu' (every device of the kind), 'metal' -> 'mps';
    UserError for anything else, and for an index of a kind priced once ('cpu:1')."""
    try:
        kind, index = spelled(text)
    except ValueError as exc:
        raise UserError(f"prices: {exc}") from None
    if kind.shared and index:
        raise UserError(f"prices: unknown device {text!r}: the {kind} is priced once, as {kind.name!r}")
    return kind.name if index is None or kind.shared else str(Device(kind, index))


def checked(prices: object) -> dict[str, float]:
    """{device spelling: USD per hour} -> {normalised device: USD per hour}, each price a number of at least
    0; one line (UserError) for anything else, and for one device priced twice."""
    if not isinstance(prices, Mapping):
        raise UserError(f"prices must be a table of device = US dollars per hour, got {prices!r}")
    out: dict[str, float] = {}
    for device, usd in prices.items():
        key = normalise_device(str(device))
        if isinstance(usd, bool) or not isinstance(usd, (int, float)) or not 0 <= usd < math.inf:
            raise UserError(f"price for {device} must be US dollars per hour, 0 or more, got {usd!r}")
        if key in out:
            twice = [str(d) for d in prices if normalise_device(str(d)) == key]
            raise UserError(f"prices: {key} is priced twice ({' and '.join(twice)})")
        out[key] = float(usd)
    return out


def price_for(prices: Mapping[str, float], device: str, devices: int = 1) -> float | None:
    """USD per hour of a case on ``devices`` devices starting at ``device`` ('gpu:0' x 2 = gpu:0 + gpu:1;
    ``prices`` as ``checked`` gives them), or None when any of them has no price."""
    first = Device.parse(device)
    total = 0.0
    for i in range(1 if first.kind.shared else devices):   # CPU "devices" share one CPU
        price = prices.get(str(Device(first.kind, first.index + i)), prices.get(first.kind.name))
        if price is None:
            return None
        total += price
    return total


def priced(cases: list, prices: Mapping[str, float] | None) -> list:
    """The plan's cases with ``options["price_per_hour"]`` set where a price matches their device(s)
    (plan.build_cases: the one hook). Cases without a matching price are returned as they are."""
    by_device = checked(prices) if prices else {}
    out = []
    for case in cases:
        price = price_for(by_device, case.device, case.devices) if by_device else None
        out.append(case if price is None else replace(case, options=case.options.replace(price_per_hour=price)))
    return out
