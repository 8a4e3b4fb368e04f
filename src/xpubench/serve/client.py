"""One streamed request to an OpenAI-compatible server, timed on the client's clock (httpx, async).

What is timed (docs/serving.md): ``start`` just before the request is handed to httpx; each streamed
``data:`` event that carries text is stamped when it is parsed (``time.perf_counter``); TTFT is the first
such stamp less ``start``, E2E the end of the stream (``[DONE]`` or the connection's end) less ``start``,
and the gaps between consecutive stamps are the request's inter-token latencies. Output tokens are the
usage field's ``completion_tokens`` (asked for with ``stream_options.include_usage``), else the chunks
with text (one token each on llama.cpp, vLLM and SGLang; said in ``tokens_counted``).

Every failure ends the request with a reason, never an exception: the server unreachable, an HTTP error
status (its body's first line), a stream that closes before ``[DONE]``, a ``data:`` line that is not JSON
(or JSON nested too deeply), an error event in the stream, no text at all, more chunks of text than
``max_tokens`` allows, an answer over its bounds (serve/bounded.py: a line, the stream, what a compressed
answer inflates to), or the request's time limit on the whole of it (``bounded.within``). A usage count
that is not a count of at most MAX_TOKENS is refused (the chunks are counted instead, and ``note`` says so).
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from xpubench.serve import bounded
from xpubench.serve.bounded import Refused
from xpubench.serve.sample import Sample

COMPLETIONS, CHAT = "/v1/completions", "/v1/chat/completions"


def payload(endpoint: str, model: str | None, prompt: str, max_tokens: int, ignore_eos: bool) -> dict[str, Any]:
    """The request body: greedy, streamed, usage asked for; ``ignore_eos`` (vLLM, SGLang, llama.cpp) so each
    answer runs to max_tokens."""
    body: dict[str, Any] = {"max_tokens": max_tokens, "stream": True, "temperature": 0.0,
                            "stream_options": {"include_usage": True}}
    if model:
        body["model"] = model
    if ignore_eos:
        body["ignore_eos"] = True
    if endpoint == CHAT:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def _text(event: dict[str, Any]) -> str:
    choices = event.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    first = choices[0]
    delta = first.get("delta") if isinstance(first.get("delta"), dict) else {}
    text = first.get("text") if "text" in first else delta.get("content")
    return text if isinstance(text, str) else ""


def _error_of(event: dict[str, Any]) -> str | None:
    err = event.get("error")
    if err is None:
        return None
    message = err.get("message") if isinstance(err, dict) else err
    return f"error event in the stream: {str(message)[:160]}"


MAX_TOKENS = 10 ** 9    # no answer holds a billion tokens: a larger usage count is refused


def chunk_limit(body: dict) -> int:
    """The most chunks of text an answer may send: 2 per token asked for, and 16 (a server that ignores
    max_tokens streams on until the request's time limit otherwise, its samples filling memory)."""
    return 2 * int(body.get("max_tokens") or 0) + 16


async def _stream(client: httpx.AsyncClient, url: str, payload: dict, sample: Sample) -> None:
    done, limit = False, chunk_limit(payload)
    async with client.stream("POST", url, json=payload) as response:
        if response.status_code != 200:
            said = await bounded.body(response, bounded.MAX_ERROR, cut=True)
            text = said.decode("utf-8", "replace").strip().splitlines()
            sample.error = f"HTTP {response.status_code}: {(text[0] if text else '')[:160]}"
            return
        async for line in bounded.lines(response):
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            now = time.perf_counter()
            try:
                event = bounded.json_of(data)
            except Refused as exc:
                sample.error = f"{exc} in the stream: {data[:80].decode('utf-8', 'replace')!r}"
                return
            if not isinstance(event, dict):
                sample.error = f"not a JSON object in the stream: {data[:80].decode('utf-8', 'replace')!r}"
                return
            if _error_of(event):
                sample.error = _error_of(event)
                return
            usage = event.get("usage")
            if isinstance(usage, dict):
                _take_usage(sample, usage)
            if _text(event):
                sample.stamps.append(now - sample.start)
                if len(sample.stamps) > limit:
                    sample.error = f"more than {limit} chunks of text for max_tokens {payload.get('max_tokens')}"
                    return
    sample.e2e_s = time.perf_counter() - sample.start
    if not done:
        sample.error = f"stream closed before [DONE] after {len(sample.stamps)} chunks"


def _take_usage(sample: Sample, usage: dict) -> None:
    """The usage field's counts; one that is there but not a count of 0 to MAX_TOKENS is refused."""
    refused = []
    for name, attr in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")):
        value = usage.get(name)
        ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS
        setattr(sample, attr, value if ok else None)
        if value is not None and not ok:
            refused.append(name)
    if refused:
        sample.note = (f"usage {' and '.join(refused)} refused (not a count of 0 to {MAX_TOKENS:,}): "
                       "the asked length or the chunks counted instead")


async def send(client: httpx.AsyncClient, url: str, body: dict, timeout_s: float, clock0: float) -> Sample:
    """Send one request and stream its answer; the Sample says what happened (never raises, but for
    cancellation)."""
    sample = Sample(start=time.perf_counter())
    try:
        async with bounded.within(timeout_s):
            await _stream(client, url, body, sample)
    except TimeoutError:
        sample.error, sample.timed_out = f"timed out after {timeout_s:g} s ({len(sample.stamps)} chunks seen)", True
    except httpx.ConnectError as exc:
        sample.error = f"cannot connect: {bounded.reason(exc)}"
    except httpx.HTTPError as exc:   # the connection reset or closed mid-stream, a protocol error
        sample.error = f"{type(exc).__name__}: {bounded.reason(exc)} after {len(sample.stamps)} chunks"
    except Refused as exc:           # an answer over its bounds (serve/bounded.py)
        sample.error = f"{exc} after {len(sample.stamps)} chunks"
    if sample.ok:
        if not sample.stamps:
            sample.error = "the answer held no text"
        else:
            sample.ttft_s = sample.stamps[0]
            if sample.output_tokens is None:
                sample.output_tokens, sample.counted = len(sample.stamps), "chunks"
    sample.start -= clock0
    return sample
