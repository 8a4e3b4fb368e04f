"""One request as measured (serve/client.py times it, serve/figures.py reads it): its times, its token
counts and why it failed. A record of plain data, without the HTTP client: the report's serving tables and
charts read a point's figures through serve/figures.py, and a report never needs httpx."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Sample:
    """One request as measured. Times are seconds; ``start`` is on the point's clock (perf_counter)."""

    start: float
    ttft_s: float | None = None
    e2e_s: float | None = None
    stamps: list[float] = field(default_factory=list)   # seconds after start of each chunk with text
    input_tokens: int | None = None                      # usage.prompt_tokens
    output_tokens: int | None = None                     # usage.completion_tokens, else chunks counted
    counted: str = "usage"                               # or "chunks"
    error: str | None = None
    timed_out: bool = False
    note: str | None = None                              # a usage count refused

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def gaps(self) -> list[float]:
        return [b - a for a, b in zip(self.stamps, self.stamps[1:])]

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (output tokens - 1): vLLM's TPOT, AIPerf's per-request inter-token latency."""
        if not self.ok or not self.output_tokens or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    def record(self) -> dict[str, Any]:
        """The raw per-request record a result keeps (``artifacts["requests"]``)."""
        return {"start_s": round(self.start, 6), "ttft_s": self.ttft_s, "e2e_s": self.e2e_s,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "counted": self.counted,
                "chunks": len(self.stamps), "error": self.error, "timed_out": self.timed_out} | (
                    {"note": self.note} if self.note else {})
