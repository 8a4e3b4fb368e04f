"""A cancellation is never lost (serve/bounded.py ``within``): a point's end, its time limit or a stop that
lands as a request's answer comes in ends that request's task. ``asyncio.wait_for`` (Python 3.10, 3.11)
dropped such a cancellation (python/cpython#86296): a serve worker then read the server's /metrics every
0.5 s for ever, its point never ending (seen twice under the whole suite; here made to happen every time,
the cancellation sent from within the server's answer)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from xpubench.serve import bounded, telemetry
from xpubench.serve.client import COMPLETIONS, payload, send

DONE = b'data: {"choices": [{"text": " t", "index": 0}]}\n\ndata: [DONE]\n\n'


def _cancelled_as_answered(work, body: bytes = b"{}") -> tuple[asyncio.Task, list]:
    """``work(client)`` run as a task that is cancelled as the server's (first) answer is made; (the task, once
    it ended or 2 s passed; the requests the server saw)."""
    seen = []

    async def go():
        def answer(request: httpx.Request) -> httpx.Response:
            seen.append(request.url.path)
            if len(seen) == 1:
                task.cancel()          # the point ends, or is cut, as the answer comes in
            return httpx.Response(200, stream=httpx.ByteStream(body))

        nonlocal task
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
            task = asyncio.ensure_future(work(client))
            await asyncio.wait({task}, timeout=2)
            return task

    task = None
    return asyncio.run(go()), seen


def test_a_set_up_call_cancelled_as_it_is_answered_is_cancelled():
    task, _ = _cancelled_as_answered(lambda c: bounded.call(c, "GET", "http://h/metrics", deadline_s=30))
    assert task.cancelled()


def test_a_request_cancelled_as_its_answer_ends_is_cancelled_not_measured():
    body = payload(COMPLETIONS, None, "hi", 1, True)
    task, _ = _cancelled_as_answered(lambda c: send(c, "http://h/v1/completions", body, 30, 0.0), DONE)
    assert task.cancelled()


def test_the_telemetry_reading_ends_when_cancelled_as_the_server_answers(monkeypatch):
    monkeypatch.setattr(telemetry, "INTERVAL_S", 0.01)
    watch = telemetry.Watch("http://h/metrics", {"running": ("requests_processing",)})

    async def during(client):
        window = asyncio.get_running_loop().create_future()   # the measured requests, still running
        await watch.during(client, window)

    task, seen = _cancelled_as_answered(during, b"requests_processing 1\n")
    assert task.cancelled() and seen == ["/metrics"]     # no reading after it was cancelled


def test_the_telemetry_reading_ends_with_its_window_without_a_cancellation(monkeypatch):
    monkeypatch.setattr(telemetry, "INTERVAL_S", 0.01)
    watch, seen = telemetry.Watch("http://h/metrics", {"running": ("requests_processing",)}), []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, stream=httpx.ByteStream(b"requests_processing 1\n"))

    async def go():
        window = asyncio.ensure_future(asyncio.sleep(0.05))
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
            await asyncio.wait_for(watch.during(client, window), 2)

    asyncio.run(go())
    assert 1 <= watch.within == len(seen) < 50


@pytest.mark.parametrize("seconds", [0.01])
def test_within_still_ends_what_outlasts_it(seconds):
    async def go():
        try:
            async with bounded.within(seconds):
                await asyncio.sleep(5)
        except TimeoutError:
            return "timed out"

    assert asyncio.run(go()) == "timed out"
