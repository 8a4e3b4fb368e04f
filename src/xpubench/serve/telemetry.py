"""The server's own figures during a point, recorded beside the client's (as NVIDIA AIPerf does): its
Prometheus ``/metrics``, read at the start of the measured window, every ``INTERVAL_S`` within it and at its
end, each time within serve/bounded.py's bounds (the server is untrusted: ``MAX_METRICS`` bytes, the
set-up deadline) and parsed by prometheus_client's text parser.

What is kept, under xpubench's names (each server's own metric names are its ``ServerSpec.telemetry``,
backends/; a server at a URL whose runtime is not known is read with every known server's names):

- ``running``: requests being processed (llama-server's ``requests_processing``, vLLM's
  ``num_requests_running``, SGLang's ``num_running_reqs``), its mean and largest reading in the window;
- ``waiting``: requests queued for a slot (``requests_deferred``, ``num_requests_waiting``,
  ``num_queue_reqs``), mean and largest;
- ``kv_cache``: the share of the KV cache in use (vLLM's ``kv_cache_usage_perc``, SGLang's ``token_usage``,
  llama-server's ``kv_cache_usage_ratio`` where its build has it), mean and largest;
- ``prompt_tokens``, ``output_tokens``: the server's token counters over the window (end less start), to
  set beside the client's own counts.

A reading sums a metric over its label sets (several models or ranks) and takes the largest share of the
KV cache. A figure the server does not expose is left out (n/a) and ``server_metrics`` says which and why
(no ``/metrics``, not Prometheus text, not exposed); the raw readings are the result's
``artifacts["telemetry"]``.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from xpubench import readfile
from xpubench.serve import bounded
from xpubench.serve.bounded import Refused

INTERVAL_S = 0.5
MAX_METRICS = 4 * readfile.MiB     # vLLM's histograms: ~100 KB
MAX_READINGS = 2_000               # a point's readings kept (every reading is in the figures)
GAUGES = ("running", "waiting", "kv_cache")
COUNTERS = ("prompt_tokens", "output_tokens")
SHARES = ("kv_cache",)             # the largest over label sets, not their sum


def parse(data: bytes, names: Mapping[str, tuple[str, ...]]) -> dict[str, float]:
    """{xpubench's name: value} of Prometheus text ``data`` (``names``: xpubench's name -> the metric names
    that stand for it, the first found winning); Refused when it is not Prometheus text. Only the samples
    of those metrics are parsed (their lines picked out first: a few of vLLM's ~100 KB of histograms), so
    a reading holds the point's event loop, and its requests' clocks, for well under a millisecond."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {metric: ours for ours, metrics in names.items() for metric in metrics}
    starts = tuple(f"{metric}{end}".encode() for metric in wanted for end in (" ", "{"))
    picked = b"\n".join(line for line in data.splitlines() if line.startswith(starts))
    found: dict[str, dict[str, float]] = {}
    try:
        for family in text_string_to_metric_families(picked.decode("utf-8", "replace")):
            for sample in family.samples:
                ours = wanted.get(sample.name)
                if ours is None or not isinstance(sample.value, (int, float)) or not math.isfinite(sample.value):
                    continue
                seen, value = found.setdefault(ours, {}), float(sample.value)
                earlier = seen.get(sample.name)
                seen[sample.name] = value if earlier is None else max(earlier, value) if ours in SHARES else \
                    earlier + value
    except Exception as exc:  # noqa: BLE001 - the parser's errors on a server's text are its reasons
        raise Refused(f"not Prometheus text ({type(exc).__name__}: {str(exc)[:80]})") from None
    return {ours: next(seen[m] for m in names[ours] if m in seen) for ours, seen in found.items()}


@dataclass
class Watch:
    """A point's readings of the server's metrics: ``await watch.read(client)`` as the window opens, then
    ``watch.during(client, window)`` as a task while ``window`` (the measured requests' task) runs (a
    reading at once, then every INTERVAL_S; cancelled as the window closes), then
    ``read`` once more. The gauges are of the readings within the window; the counters, of its two ends."""

    url: str                                      # the metrics route's full address
    names: Mapping[str, tuple[str, ...]]
    deadline_s: float = 30.0
    readings: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    within: int = 0                               # readings taken within the window (not at its ends)
    problem: str | None = None

    async def read(self, client) -> bool:
        """One reading; False once the server's metrics can't be read (``problem`` says why)."""
        if self.problem is not None:
            return False
        said = await bounded.call(client, "GET", self.url, deadline_s=self.deadline_s, cap=MAX_METRICS,
                                  read=lambda b: parse(b, self.names))
        if said.status != 200 or said.error:
            self.problem = said.error or (f"HTTP {said.status}" if said.status else "no answer")
            return False
        if len(self.readings) < MAX_READINGS:
            self.readings.append((time.perf_counter(), said.value or {}))
        return True

    async def during(self, client, window: asyncio.Future) -> None:
        await asyncio.sleep(0)            # the window's first requests sent
        while not window.done() and await self.read(client):
            self.within += 1
            await asyncio.sleep(INTERVAL_S)

    def figures(self) -> tuple[dict, dict]:
        """(the point's ``server_*`` figures, the raw readings); ``server_metrics`` names what is left out."""
        route = "/" + self.url.split("/", 3)[-1]
        if not self.readings:
            return {"server_metrics": f"no server metrics ({route}: {self.problem or 'none read'})"}, {}
        out: dict = {}
        inside = self.readings[1:1 + self.within]   # the first reading is the window's opening, the last its close
        for name in GAUGES:
            values = [r[name] for _, r in inside if name in r]
            if values:
                out[f"server_{name}_mean"], out[f"server_{name}_max"] = statistics.fmean(values), max(values)
        first, last = self.readings[0][1], self.readings[-1][1]
        for name in COUNTERS:
            if name in first and name in last and len(self.readings) > self.within + 1:
                out[f"server_{name}"] = last[name] - first[name]
        absent = [n for n in (*GAUGES, *COUNTERS) if not any(n in r for _, r in self.readings)]
        said = [f"{len(inside)} readings of {route} within the window (every {INTERVAL_S:g} s)"]
        said += [f"not exposed: {', '.join(absent)}"] if absent else []
        said += [f"stopped reading: {self.problem}"] if self.problem else []
        start = self.readings[0][0]
        raw = {"t_s": [round(t - start, 3) for t, _ in self.readings],
               **{n: [r.get(n) for _, r in self.readings] for n in (*GAUGES, *COUNTERS) if n not in absent}}
        return out | {"server_metrics": "; ".join(said)}, raw
