"""A sweep point as a line of the results file: a ``serve`` case (results/modes.py, its figures in
results/metrics_serve.py), its raw samples and its requests, and what the server said about itself; the
runner adds the fingerprint of the client's machine, as for every case.

Every record is read back as the results file's readers will read it (``readable``: one line within
results/store.py's MAX_LINE less room for the fingerprint, the schema of results/validate.py) before its
worker hands it over: what a server can put in it is bounded first (serve/bounded.py: its description
shaped, a model id cut, usage counts refused), and the point's warning names each value refused or cut.

The case's key names what was served and asked, not the address it answered at, so that ``xpubench
compare`` matches the same point of two runs, servers or machines (plan/serve.py, docs/serving.md "Keys"):
``<model>/<engine>/<device>/serve/<format>/c<users>[/r<rate>]/<input>/<output>/<endpoint>``. The server's
version, the command it was started with and its own metrics are figures of the point.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from xpubench.errors import UserError, stopped_by
from xpubench.results.metrics import check
from xpubench.results.outcome import Outcome
from xpubench.results.schema import Run, run_from_dict
from xpubench.results.store import MAX_LINE
from xpubench.serve.bounded import TEXT, shaped
from xpubench.serve.figures import Slo, point_figures
from xpubench.serve.sweep import PointRun

FINGERPRINT_ROOM = 1 << 20   # what the runner adds to a record (the fingerprint, the machine's state)


def outcome_of(host, point: PointRun, *, input_len: int, output_len: int, endpoint: str, slo: Slo | None,
               usd_per_hour: float | None, length_note: str = "", telemetry: tuple[dict, dict] = ({}, {})
               ) -> Outcome:
    """The point as its worker hands it over (``host``: serve/host.py's Host, what the server said;
    ``telemetry``: the server's own figures and readings, serve/telemetry.py)."""
    load = point.load
    metrics, samples = point_figures(point.samples, point.window_s, input_len, slo, usd_per_hour)
    cut: list[str] = []
    metrics |= {"load": load.label, "concurrency": load.concurrency, "request_rate": load.rate,
                "input_len": input_len, "output_len": output_len, "endpoint": endpoint,
                "warmup_requests": len(point.warmup_samples), "server": host.server,
                "model": shaped(host.model, cut, "the model id"), "server_command": host.command,
                "interrupted": True if point.interrupted else None, **telemetry[0]}
    described, unread = host.provenance.get("cut"), host.provenance.get("unread")
    notes = [n for n in (length_note, metrics.get("warning"), point.cut, _warmup_note(point), _usage_note(point),
                         unread and f"the server's description was refused in part ({unread})",
                         described and f"the server's description is recorded cut ({described})",
                         cut and f"recorded cut: {'; '.join(cut)}",
                         host.asked is None and len(host.model) > TEXT and
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
    artifacts: dict[str, Any] = {"requests": [s.record() for s in point.samples], "server": host.provenance}
    if telemetry[1]:
        artifacts["telemetry"] = telemetry[1]
    return Outcome(status="ok" if ok else "error", message=message, metrics=check(metrics),
                   samples=samples if ok else {}, artifacts=artifacts)


def readable(run: Run, room: int = FINGERPRINT_ROOM) -> Run:
    """``run``, once it reads back as the results file's readers read it, with ``room`` to spare for what the
    runner adds; else UserError naming the value they would refuse (the record is not appended: a file they
    refuse would lose its good points too)."""
    line = run.to_json()
    if len(line.encode()) + room > MAX_LINE:
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
