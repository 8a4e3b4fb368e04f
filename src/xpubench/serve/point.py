"""A ``serve`` case measured in its worker process (launch/dispatch.py's loop of the serve mode): one point
of load against the server its run opened for it (serve/host.py, found in the worker's environment).

In order: the point's prompts, made before its clock starts (serve/prompts.py: each round's and each
point's texts their own, from the case's key and its seed, which a further process of the case moves on:
harness/target.py ``process_case``); then the warm-up and the measured requests (serve/sweep.py), the
server's metrics read over the measured window (serve/telemetry.py); then the point's outcome
(serve/record.py), the credentials replaced wherever the server echoed them, checked readable.

A Ctrl-C, SIGTERM or SIGHUP that reaches the worker (the runner passes its own stop on: launch/supervise.py)
ends the point with the requests finished by then: the outcome says it was interrupted.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses

from xpubench.case import Case
from xpubench.errors import stops_like_ctrl_c
from xpubench.results.outcome import Outcome
from xpubench.results.redact import scrubbed
from xpubench.results.schema import Run
from xpubench.serve.client import CHAT, COMPLETIONS, payload
from xpubench.serve.figures import parse_slo
from xpubench.serve.host import Host, setup_timeout_s
from xpubench.serve.prompts import Prompts
from xpubench.serve.record import outcome_of, readable
from xpubench.serve.sweep import Load, measure
from xpubench.serve.telemetry import Watch

ENDPOINTS = {"completions": COMPLETIONS, "chat": CHAT}


def load_of(case: Case) -> Load:
    """What the point asks of the server (its case's users, rate and options)."""
    o = case.options
    return Load(case.users, case.rate, requests=o["requests"], warmup=o["warmup"], duration_s=o.get("duration_s"),
                request_timeout_s=o["request_timeout_s"], point_timeout_s=o["point_timeout_s"], seed=case.seed)


def measure_case(case: Case) -> Outcome:
    """The point of ``case`` against the server in this process's environment."""
    host, o = Host.from_environment(), case.options
    load, endpoint, timeout = load_of(case), ENDPOINTS[o["endpoint"]], setup_timeout_s(case.options)
    prompts = Prompts(host.url, o["input_len"], case.seed, o.get("prompts") or "random", host.asked,
                      headers=host.headers, stream=case.key)
    texts = prompts.make(0, load.warmup + load.requests, timeout)
    bodies = [payload(endpoint, host.asked, t, o["output_len"], o.get("ignore_eos", True)) for t in texts]
    watch = Watch(host.metrics, host.telemetry, timeout) if host.metrics else None
    with stops_like_ctrl_c():   # SIGTERM and SIGHUP end the point as Ctrl-C does, its finished requests kept
        point = measure(host.url + endpoint, bodies[:load.warmup], bodies[load.warmup:], load, host.headers,
                        watch=watch)
    slo = o.get("slo")
    outcome = outcome_of(host, point, input_len=o["input_len"], output_len=o["output_len"], endpoint=endpoint,
                         slo=parse_slo(slo) if slo else None, usd_per_hour=o.get("price_per_hour"),
                         length_note=prompts.length_note, telemetry=watch.figures() if watch else ({}, {}))
    outcome = _scrubbed(outcome, secrets(host.headers))
    readable(Run(case=case.as_dict(), status=outcome.status, message=outcome.message, metrics=outcome.metrics,
                 samples=outcome.samples, artifacts=outcome.artifacts))
    return outcome


def secrets(headers: dict[str, str]) -> tuple[str, ...]:
    """The credentials the requests carry (a Bearer key; a Basic pair's encoding and its password)."""
    kind, _, value = headers.get("Authorization", "").partition(" ")
    if kind == "Bearer" and value:
        return (value,)
    if kind == "Basic" and value:
        try:
            password = base64.b64decode(value, validate=True).decode().partition(":")[2]
        except (binascii.Error, UnicodeDecodeError):
            password = ""
        return tuple(v for v in (value, password) if v)
    return ()


def _scrubbed(outcome: Outcome, secrets: tuple[str, ...]) -> Outcome:
    """``outcome`` with the credentials sent replaced wherever the server echoed them (an error body, its
    models or metadata): kept nowhere, printed nowhere (results/redact.py)."""
    return dataclasses.replace(outcome, **{f.name: scrubbed(getattr(outcome, f.name), secrets)
                                           for f in dataclasses.fields(outcome)}) if secrets else outcome
