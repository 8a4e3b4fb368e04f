"""The server a group of ``serve`` cases shares, for the run's sweep (launch/runner.py opens one around the
points that name it, and each point's worker process measures against it): at the case's URL, or started
here from its engine's ``ServerSpec`` (backends/) and stopped after the group's last point, Ctrl-C and
errors included.

Which points share a server is ``server_of(case)``: the engine, the device, the model and its format, and
the options that start it (``SERVER_OPTIONS``: the URL, the weights or named shape, slots, context, threads).
A point's worker finds the server in its environment: ``XPUBENCH_SERVER``, a JSON file of what it said
about itself (``Host.described``), and ``XPUBENCH_SERVER_HEADERS``, the credentials sent with every request
(kept in no file, no record). After each point the runner asks ``gone()``: a server that exited during it
ends the group (docs/serving.md, "Faults").
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpubench import backends, envnames
from xpubench.case import SERVE, Case
from xpubench.errors import UserError

SERVER_OPTIONS = ("url", "weights", "preset", "slots", "context", "threads", "served_model")
SETUP_S = 30.0   # a set-up call (the server's description, /tokenize, /metrics), or --request-timeout if shorter


def server_of(case: Case) -> tuple:
    """What identifies the server a serve case is measured against (the cases that share it share this)."""
    return (case.backend, case.device, case.workload, case.precision,
            *(repr(case.options.get(k)) for k in SERVER_OPTIONS))


def setup_timeout_s(options) -> float:
    """A set-up call's time limit for a case's options: SETUP_S, or its --request-timeout if shorter."""
    return min(SETUP_S, float(options.get("request_timeout_s") or SETUP_S))


@dataclass
class Host:
    """A server and what it said about itself: what a point's record carries."""

    url: str
    server: str                            # "llama.cpp llama-server 0.5.0 (...)", "vLLM 0.9.1"
    model: str                             # the id /v1/models gave
    provenance: dict[str, Any]             # server.provenance's description
    asked: str | None = None               # the requests' model field (None: left out, the server's default)
    command: str | None = None             # the command xpubench started it with
    metrics: str | None = None             # its Prometheus route's address, where known
    telemetry: dict[str, list[str]] = field(default_factory=dict)   # xpubench's name -> its metrics' names
    headers: dict[str, str] = field(default_factory=dict, repr=False)   # the credentials (never written)
    process: Any = field(default=None, repr=False)   # the serve.server.Server started here

    def described(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("url", "server", "model", "provenance", "asked", "command", "metrics",
                                              "telemetry")}

    def gone(self) -> str | None:
        """Why a server started here is no longer there, or None (one at a URL is not watched)."""
        return self.process.gone() if self.process else None

    @classmethod
    def from_environment(cls, environ=os.environ) -> Host:
        """The server a point's worker measures against (the runner's ``environment``)."""
        where = environ.get(envnames.SERVER)
        if not where:
            raise UserError("a serve case runs against a server its run opened: run it with `xpubench run` or "
                            "`xpubench serve`")
        headers = json.loads(environ.get(envnames.SERVER_HEADERS) or "{}")
        return cls(**json.loads(Path(where).read_text()), headers=headers)


def _asked(case: Case, first: str | None) -> str | None:
    """The requests' model field: --served-model, else the server's first id, unless it is longer than a
    record keeps (serve/bounded.py's TEXT): then none, and the server answers with its default."""
    from xpubench.serve.bounded import TEXT

    return case.options.get("served_model") or (first if first and len(first) <= TEXT else None)


@contextlib.contextmanager
def opened(case: Case, headers: dict[str, str] | None = None, say: Callable[[str], None] = print
           ) -> Iterator[Host]:
    """The server of ``case`` (and of the cases that share it: ``server_of``), at its URL or started here and
    stopped on leaving; UserError (one line) when it cannot be reached or does not start."""
    from xpubench.serve.server import Server, provenance, server_name

    url, timeout = case.options.get("url"), setup_timeout_s(case.options)
    if url:
        info, first = provenance(url, timeout, headers)
        spec = runtime_spec(case.backend)
        yield Host(url=url, server=server_name(info), model=case.options.get("served_model") or first or "unknown",
                   provenance=info, asked=_asked(case, first), metrics=f"{url}{spec.metrics if spec else '/metrics'}",
                   telemetry=_names(spec), headers=headers or {})
        return
    spec = backends.get(case.backend).server()
    if spec.missing:
        raise UserError(f"{case.backend}: {spec.missing}")
    model, origin = _model(case, spec)
    index = case.device.partition(":")[2] or None
    server = Server(spec, model, name=case.workload, slots=case.options["slots"], context=case.options["context"],
                    fmt=case.precision, threads=case.options.get("threads"), device_index=index)
    say(f"starting {server.command_line}")
    with server:
        info, first = provenance(server.url, timeout)
        version = server.version()
        say(f"{spec.title} {version} ready at {server.url} ({case.options['slots']} slots, model {origin})")
        yield Host(url=server.url, server=f"{spec.title} {version}", model=first or case.workload,
                   provenance=info | {"origin": origin}, asked=_asked(case, first), command=server.command_line,
                   metrics=f"{server.url}{spec.metrics}" if spec.metrics else None, telemetry=_names(spec),
                   process=server)


def _model(case: Case, spec) -> tuple[str, str]:
    """(what the server is given as its model, where it came from in words)."""
    weights = case.options.get("weights")
    if spec.serves != "gguf":
        return str(weights), f"the checkpoint {weights}"
    from xpubench.backends.llamacpp_.bench import usable_threads
    from xpubench.serve.model import resolve

    served = resolve(weights, case.options.get("preset"), case.precision, case.seed, usable_threads())
    return str(served.path), served.origin


def runtime_spec(backend: str):
    """The ServerSpec of the engine a case names, or None (a server at a URL whose runtime is not known)."""
    return backends.record(backend).server()


def _names(spec) -> dict[str, list[str]]:
    """The metric names a server's figures are read under: its engine's, else every known engine's."""
    specs = [spec] if spec is not None else [s for s in (backends.get(n).server() for n in backends.names()) if s]
    names: dict[str, list[str]] = {}
    for s in specs:
        for ours, theirs in s.telemetry.items():
            names.setdefault(ours, []).extend(theirs)
    return names


@contextlib.contextmanager
def environment(host: Host) -> Iterator[dict[str, str]]:
    """The variables each point's worker is handed to find ``host``: its description in a private file
    (removed on leaving) and the credentials."""
    with tempfile.TemporaryDirectory(prefix="xpubench-server-") as folder:
        path = Path(folder) / "server.json"
        path.write_text(json.dumps(host.described()))
        yield {envnames.SERVER: str(path), envnames.SERVER_HEADERS: json.dumps(host.headers)}


@dataclass
class Hosts:
    """How a run's sweep opens the servers its serve cases share (launch/runner.py ``Sweep.group``):
    ``key(case)`` names a case's server (None: a case of another mode), ``opened(case)`` is a context giving
    (the variables its points' workers are handed, ``gone``). ``fatal``: a server that does not start ends
    the command in one line (``xpubench serve``, whose sweep is that server's); else each of its points
    records why (``xpubench run``, whose other servers and cases go on)."""

    headers: dict[str, str] = field(default_factory=dict, repr=False)   # the credentials of a --url
    say: Callable[[str], None] = print
    fatal: bool = False

    def key(self, case: Case) -> tuple | None:
        return server_of(case) if case.mode == SERVE else None

    @contextlib.contextmanager
    def opened(self, case: Case) -> Iterator[tuple[dict[str, str], Callable[[], str | None]]]:
        with opened(case, self.headers, self.say) as host, environment(host) as variables:
            yield variables, host.gone
