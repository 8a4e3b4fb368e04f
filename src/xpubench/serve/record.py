"""A sweep point as a line of the results file: a ``serve`` case (results/modes.py, its figures in
results/metrics_serve.py), its raw samples and its requests, the fingerprint of the client's machine and
what the server said about itself.

The case's key names what was asked, not who answered, so that ``xpubench compare`` matches the same
point of two servers or two machines: ``<label>/http/<device>/serve/<format>/b<concurrency>/<load>/
<input>/<output>/<endpoint>`` (label: the model's, or ``--label``; device: ``cpu`` for the llama.cpp CPU
build xpubench started, ``remote`` for a URL; an open-loop point's batch size is its cap on requests in
flight). The server, its version and the command it was started with are figures of the point.
"""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass
from typing import Any

from xpubench.backends.fingerprint import fingerprint, package_versions
from xpubench.case import Case
from xpubench.errors import stopped_by
from xpubench.results import machine
from xpubench.results.metrics import check
from xpubench.results.schema import Run
from xpubench.serve.figures import Slo, point_figures
from xpubench.serve.sweep import PointRun
from xpubench.units import utc_now

BACKEND = "http"     # the load generator: every serve case is measured through the OpenAI HTTP API
KEY_OPTIONS = ("load", "input_len", "output_len", "endpoint")


@dataclass(frozen=True)
class Target:
    """Who answers and what a point's case is called."""

    url: str
    label: str                   # the case's workload: the model's name, or --label
    device: str                  # "cpu" (the llama.cpp build xpubench started) or "remote"
    precision: str               # the weights' format; "as-served" for a URL (the server does not say)
    server: str                  # "llama.cpp b1-0c1e570 (0.5.0-dev ...)"
    model: str                   # the id /v1/models gave
    provenance: dict[str, Any]   # server.provenance(url)
    command: str | None = None   # the command xpubench started the server with


def case_of(target: Target, load, input_len: int, output_len: int, endpoint: str, seed: int) -> Case:
    kind = "closed" if load.rate is None else f"poisson {load.rate:g} rps"
    return Case(workload=target.label, backend=BACKEND, device=target.device, mode="serve",
                precision=target.precision, batch_size=load.concurrency, seed=seed,
                options={"load": kind, "input_len": input_len, "output_len": output_len,
                         "endpoint": "chat" if "chat" in endpoint else "completions",
                         "url": target.url, "requests": load.requests, "warmup": load.warmup},
                key_options=KEY_OPTIONS)


def environment(target: Target) -> dict[str, Any]:
    """The fingerprint's environment: this host (the client) and the server as a backend record."""
    from xpubench.devices.detect import cpu_device, host

    here = host()
    devices = [cpu_device(here.get("cpu") or {})] if target.device == "cpu" else []
    server = {"installed": True, "version": target.server, "devices": devices, "server": target.provenance}
    return {"host": here, "packages": package_versions(["httpx", "gguf"]),
            "backends": {"llamacpp" if target.device == "cpu" else "remote": server}}


def to_run(target: Target, point: PointRun, *, input_len: int, output_len: int, endpoint: str, seed: int,
           slo: Slo | None, usd_per_hour: float | None, env: dict, started: str, snap, process: int = 0,
           processes: int = 1, length_note: str = "") -> Run:
    load = point.load
    metrics, samples = point_figures(point.samples, point.window_s, input_len, slo, usd_per_hour)
    metrics |= {"load": load.label, "concurrency": load.concurrency, "request_rate": load.rate,
                "input_len": input_len, "output_len": output_len, "endpoint": endpoint,
                "warmup_requests": len(point.warmup_samples), "server": target.server, "model": target.model,
                "server_command": target.command, "interrupted": True if point.interrupted else None}
    notes = [n for n in (length_note, _warmup_note(point)) if n]
    if point.interrupted:
        notes.append(f"interrupted ({stopped_by(point.interrupted)}): {len(point.samples)} requests finished, "
                     f"{point.in_flight} in flight not measured")
    metrics["warning"] = "; ".join(notes) or None
    metrics = {k: v for k, v in metrics.items() if v is not None or k in ("warning",)}
    ok = metrics.get("completed", 0) > 0
    message = "" if ok else _no_request_completed(point, metrics)
    if ok and metrics.get("failed"):
        message = f"{metrics['failed']} of {metrics['requests']} requests failed: {metrics['failure_reasons']}"
    return Run(case=case_of(target, load, input_len, output_len, endpoint, seed).as_dict(),
               status="ok" if ok else "error", message=message, metrics=check(metrics),
               samples=samples if ok else {}, placement=target.url,
               artifacts={"requests": [s.record() for s in point.samples], "server": target.provenance},
               fingerprint=fingerprint(env) | {"client": platform.node()}, started_at=started,
               duration_s=round(time.monotonic() - snap[1], 3), process=process, processes=processes,
               machine=machine.state(snap[0], machine.snapshot()))


def _no_request_completed(point: PointRun, metrics: dict) -> str:
    """Why a point has no measured request: it was interrupted first (in its warm-up or after), or every
    request failed, or none was sent."""
    if point.interrupted:
        where = " in the warm-up" if len(point.warmup_samples) < point.load.warmup else ""
        return f"interrupted ({stopped_by(point.interrupted)}){where} before any measured request completed"
    return f"no request completed: {metrics.get('failure_reasons') or 'none was sent'}"


def _warmup_note(point: PointRun) -> str:
    bad = [s for s in point.warmup_samples if not s.ok]
    return f"{len(bad)} of {len(point.warmup_samples)} warm-up requests failed" if bad else ""


def start_snapshot() -> tuple[Any, float, str]:
    """(machine snapshot, monotonic clock, ISO time) at a point's start."""
    return machine.snapshot(), time.monotonic(), utc_now()
