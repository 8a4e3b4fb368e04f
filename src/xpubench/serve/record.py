"""A sweep point as a line of the results file: a ``serve`` case (results/modes.py, its figures in
results/metrics_serve.py), its raw samples and its requests, the fingerprint of the client's machine and
what the server said about itself.

Every record is read back as the results file's readers will read it (``readable``: one line within
results/store.py's MAX_LINE, the schema of results/validate.py) before it is appended: what a server can
put in it is bounded first (serve/bounded.py: its description shaped, a model id or label cut, usage counts
refused), and the point's warning names each value refused or cut.

The case's key names what was asked, not who answered, so that ``xpubench compare`` matches the same
point of two servers or two machines: ``<label>/http/<device>/serve/<format>/b<concurrency>/<load>/
<input>/<output>/<endpoint>`` (label: the model's, or ``--label``; device: ``cpu`` for the llama.cpp CPU
build xpubench started, ``remote`` for a URL; an open-loop point's batch size is its cap on requests in
flight). The server, its version and the command it was started with are figures of the point.
"""

from __future__ import annotations

import json
import platform
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from xpubench.backends.fingerprint import fingerprint, package_versions
from xpubench.case import Case
from xpubench.errors import UserError, stopped_by
from xpubench.results import machine
from xpubench.results.metrics import check
from xpubench.results.schema import Run, run_from_dict
from xpubench.results.store import MAX_LINE
from xpubench.serve.bounded import TEXT, shaped
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
    asked: str | None = None     # the requests' model field (None: left out, the server's default model)


def case_of(target: Target, load, input_len: int, output_len: int, endpoint: str, seed: int,
            cut: list[str] | None = None) -> Case:
    kind = "closed" if load.rate is None else f"poisson {load.rate:g} rps"
    return Case(workload=shaped(target.label, [] if cut is None else cut, "the label"), backend=BACKEND,
                device=target.device, mode="serve",
                precision=target.precision, batch_size=load.concurrency, seed=seed,
                options={"load": kind, "input_len": input_len, "output_len": output_len,
                         "endpoint": "chat" if "chat" in endpoint else "completions",
                         "url": target.url, "requests": load.requests, "warmup": load.warmup},
                key_options=KEY_OPTIONS)


def environment(target: Target) -> dict[str, Any]:
    """The fingerprint's environment: this host (the client) and the server as a backend record."""
    from xpubench.devices.detect import cpu_device, host
    from xpubench.devices.device import CPU, kind_of

    here = host()
    started_here = kind_of(target.device) is CPU   # llama-server on this CPU; else "remote"
    devices = [cpu_device(here.get("cpu") or {})] if started_here else []
    server = {"installed": True, "version": target.server, "devices": devices, "server": target.provenance}
    return {"host": here, "packages": package_versions(["httpx", "gguf"]),
            "backends": {"llamacpp" if started_here else "remote": server}}


def prints_of(target: Target) -> dict[str, Any]:
    """The sweep's fingerprint (every point's record carries it): this host's, with the server as a
    backend, and how busy other processes kept the CPU before the first point (``cpu_busy_at_start``)."""
    return fingerprint(environment(target)) | {"client": platform.node()}


def to_run(target: Target, point: PointRun, *, input_len: int, output_len: int, endpoint: str, seed: int,
           slo: Slo | None, usd_per_hour: float | None, prints: dict, started: str, snap, process: int = 0,
           processes: int = 1, length_note: str = "") -> Run:
    """The point as a results-file line (``prints``: the sweep's fingerprint, taken once at its start)."""
    load = point.load
    metrics, samples = point_figures(point.samples, point.window_s, input_len, slo, usd_per_hour)
    cut: list[str] = []
    metrics |= {"load": load.label, "concurrency": load.concurrency, "request_rate": load.rate,
                "input_len": input_len, "output_len": output_len, "endpoint": endpoint,
                "warmup_requests": len(point.warmup_samples), "server": target.server,
                "model": shaped(target.model, cut, "the model id"), "server_command": target.command,
                "interrupted": True if point.interrupted else None}
    case = case_of(target, load, input_len, output_len, endpoint, seed, cut)
    described, unread = target.provenance.get("cut"), target.provenance.get("unread")
    notes = [n for n in (length_note, metrics.get("warning"), _warmup_note(point), _usage_note(point),
                         unread and f"the server's description was refused in part ({unread})",
                         described and f"the server's description is recorded cut ({described})",
                         cut and f"recorded cut: {'; '.join(cut)}",
                         target.asked is None and len(target.model) > TEXT and
                         "the requests named no model (the id is too long to send): the server's default") if n]
    if point.interrupted:
        notes.append(f"interrupted ({stopped_by(point.interrupted)}): {len(point.samples)} requests finished, "
                     f"{point.in_flight} in flight not measured")
    metrics["warning"] = "; ".join(notes) or None
    metrics = {k: v for k, v in metrics.items() if v is not None or k in ("warning",)}
    ok = metrics.get("completed", 0) > 0
    message = "" if ok else _no_request_completed(point, metrics)
    if ok and metrics.get("failed"):
        message = f"{metrics['failed']} of {metrics['requests']} requests failed: {metrics['failure_reasons']}"
    return Run(case=case.as_dict(), status="ok" if ok else "error", message=message, metrics=check(metrics),
               samples=samples if ok else {}, placement=target.url,
               artifacts={"requests": [s.record() for s in point.samples], "server": target.provenance},
               fingerprint=prints, started_at=started, duration_s=round(time.monotonic() - snap[1], 3),
               process=process, processes=processes, machine=machine.state(snap[0], machine.snapshot()))


def readable(run: Run) -> Run:
    """``run``, once it reads back as the results file's readers read it; else UserError naming the value
    they would refuse (the record is not appended: a file they refuse would lose its good points too)."""
    line = run.to_json()
    if len(line.encode()) > MAX_LINE:
        raise UserError(f"the record of {run.key[:200]} is {len(line.encode()):,} bytes, over a results file's "
                        f"{MAX_LINE >> 20} MiB line: not appended (fewer --requests per point make it smaller)")
    run_from_dict(json.loads(line), where=f"the record of {run.key[:200]} (not appended)")
    return run


def _usage_note(point: PointRun) -> str:
    notes = Counter(s.note for s in point.samples if s.note)
    return "; ".join(f"{n} of {len(point.samples)} requests: {note}" for note, n in notes.most_common())


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
