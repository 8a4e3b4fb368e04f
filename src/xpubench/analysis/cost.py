"""What a result costs, from the price per device-hour its case carries (plan/prices.py), and rankings of
devices by time and by cost.

Formulas (throughput is the steady-state figure, compile and warm-up excluded; s = price / 3600 is
dollars per second):

* $ per 1M training samples = s x 1e6 / (training samples per second)
* $ per steady epoch        = s x (seconds per steady epoch)
* $ per 1M predictions      = s x 1e6 / (predictions per second)
* $ per 1M generated tokens = s x 1e6 / (decode tokens per second); per 1M prompt tokens: the prefill rate
* $ per PFLOP (matmul)      = s x 1e15 / (warm FLOP per second)
* $ to a quality target     = s x (seconds to target)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from xpubench.results.metrics import unit
from xpubench.results.modes import mode_of

PER = {"FLOP/s": 1e15}   # a rate is priced per 1M of what it counts; FLOPs per PFLOP


def result_cost(metrics: Mapping, mode: str, price_per_hour: float | None) -> dict:
    """The Cost metrics of one result (results/metrics_added.py), the figures its mode's record prices
    (``Mode.priced``: training -> $ per 1M samples, per steady epoch and to its target; inference -> $ per
    1M predictions; generation -> $ per 1M generated and prompt tokens; matmul -> $ per PFLOP);
    ``cost_na`` with the reason where no price was given."""
    if price_per_hour is None:
        return {"cost_na": "n/a: no price for this device (--price-per-hour DEVICE=USD or --prices FILE)"}
    record = mode_of(mode)
    per_s = price_per_hour / 3600.0
    figures = {"usd_per_hour": price_per_hour}
    for name, source in record.priced if record else ():
        value = metrics.get(source)
        if value:
            figures[name] = per_s * value if unit(source) == "s" else per_s * PER.get(unit(source), 1e6) / value
    return figures


@dataclass(frozen=True)
class Ranking:
    by_time: list[str]          # fastest first
    by_cost: list[str]          # cheapest first (only the priced options)
    unpriced: list[str]         # options without a price: not in by_cost
    differences: list[str]      # one sentence per pair whose order differs between the two rankings

    @property
    def same_order(self) -> bool:
        return not self.differences


def rank_time_and_cost(options: Mapping[str, tuple[float, float | None]]) -> Ranking:
    """Rank options ({label: (seconds per result, USD per result or None)}) by time and by cost and say,
    pair by pair, where the faster one is not the cheaper one."""
    by_time = sorted(options, key=lambda k: (options[k][0], k))
    priced = [k for k in by_time if options[k][1] is not None]
    by_cost = sorted(priced, key=lambda k: (options[k][1], options[k][0], k))
    differences = []
    for i, fast in enumerate(priced):
        for slow in priced[i + 1:]:
            (t_fast, c_fast), (t_slow, c_slow) = options[fast], options[slow]
            if c_slow < c_fast and t_slow > t_fast:
                differences.append(f"{fast} is faster than {slow} ({t_slow / t_fast:.2f}x) but {slow} is cheaper "
                                   f"(${c_slow:.4g} vs ${c_fast:.4g} per result, {c_fast / c_slow:.2f}x)")
    return Ranking(by_time, by_cost, [k for k in by_time if options[k][1] is None], differences)
