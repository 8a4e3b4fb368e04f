"""Generation against the chip, derived on load from the raw figures a generation result carries
(results/metrics_generate.py; llama's worker records them):

- **pp MFU** (``prefill_mfu``): ``prefill_flops / ttft_s`` over the chip's peak at the precision the
  matmuls compute in (``peak_flops_per_s``, analysis/peak.py; int8 weight-only computes in bf16).
- **tg against its bandwidth bound** (``pct_of_bandwidth_bound``): decode at batch B reads every weight
  once per step and each sequence's KV cache, ``decode_bytes_per_token`` per generated token
  (workloads/llama/costs.py); at a memory bandwidth W no decode can exceed W / those bytes tokens/s
  (``bandwidth_bound_tokens_per_s``). W is the fastest bandwidth any backend measured on this device
  (``xpubench ceilings``: STREAM copy/triad, recorded in the run's fingerprint; the frameworks' copy
  kernels differ, the memory is the device's), else the device's spec bandwidth (the environment
  record), else unknown: the share is then n/a, with the reason.
  A share above 100% is never stored: a measured bandwidth is a floor of the memory's real rate (a
  loaded machine reads it low, a run's own brief figure most of all), so decode above it says the bound
  is unreliable — the bandwidth read low, or the bytes per token are undercounted — and
  ``bandwidth_bound_note`` (starting "unreliable bound") says what was found and the bandwidth the decode
  rate itself implies.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from xpubench.backends.peaks import device_record
from xpubench.case import Case
from xpubench.ceilings.runtime import when_said


def bandwidth(case: Case, fp: dict) -> tuple[float | None, str | None]:
    """(bytes/s, where it came from) for the case's device: the fastest any backend measured on it (memory
    bandwidth is the device's; a framework's copy kernel only reaches part of it), else its spec, else
    (None, None)."""
    measured = {key: entry for key, entry in (((fp.get("ceilings") or {}).get("bandwidth")) or {}).items()
                if key.split("/", 1)[-1] == case.device and (entry or {}).get("bytes_per_s")}
    if measured:
        key, entry = max(measured.items(), key=lambda item: item[1]["bytes_per_s"])
        how = entry.get("source") or "xpubench ceilings"   # a run's own brief figure says so (ceilings/runtime.py)
        when = when_said(entry, now="measured for this run")   # cached or measured then, its spread
        said = f"{key.split('/')[0]}'s copy/triad, {how}" + (f"; {when}" if when else "")
        return float(entry["bytes_per_s"]), f"measured ({said})"
    spec = device_record(fp, case.backend, case.device).get("memory_bandwidth")
    if spec:
        return float(spec), "the device's spec bandwidth (no measured one recorded)"
    return None, None


def add_generation_bounds(metrics: MutableMapping[str, Any], case: Case, fp: dict) -> None:
    """Adds pp MFU and the share of the bandwidth bound (module docstring) in place, where the result
    carries the counts they need."""
    flops, ttft, peak = metrics.get("prefill_flops"), metrics.get("ttft_s"), metrics.get("peak_flops_per_s")
    if flops and ttft:
        metrics["prefill_flops_per_s"] = flops / ttft
        metrics["prefill_mfu"] = flops / ttft / peak if peak else None
    per_token, rate = metrics.get("decode_bytes_per_token"), metrics.get("decode_tokens_per_s")
    if not per_token or not rate:
        return
    bw, source = bandwidth(case, fp)
    if bw is None:
        metrics["bandwidth_bound_note"] = ("no memory bandwidth known for this device: run `xpubench ceilings` "
                                           "to measure it")
        return
    bound = bw / per_token
    metrics.update(bound_bandwidth=bw, bound_bandwidth_source=source, bandwidth_bound_tokens_per_s=bound)
    share = rate / bound
    if share > 1:
        metrics["bandwidth_bound_note"] = (
            f"unreliable bound, not printed: decode ran at {rate:,.1f} tokens/s, above the bound of {bound:,.1f} "
            f"({share:.0%}) that {per_token / 1e6:,.1f} MB read per token at {bw / 1e9:,.1f} GB/s ({source}) allow; "
            f"it moved at least {rate * per_token / 1e9:,.1f} GB/s, so the bandwidth figure read low (measured "
            "while the machine was busy? `xpubench ceilings` on a quiet machine measures it) or the bytes per "
            "token are undercounted")
        return
    metrics["pct_of_bandwidth_bound"] = share
