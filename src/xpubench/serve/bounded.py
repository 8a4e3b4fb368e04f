"""What a server sends, read within bounds: no answer can hang ``xpubench serve`` or raise its memory
(docs/serving.md, "Faults").

- **Time**: every request, the set-up calls included, runs under one deadline on the whole of it
  (``within``): a server that trickles a byte a second resets httpx's per-read timeout, never the deadline.
- **Size**: a body is read raw and inflated here as its ``Content-Encoding`` says (identity, gzip or
  deflate; xpubench asks for identity), never past a cap on what it inflates to: a server-sent event's
  line at most ``MAX_LINE``, a whole stream ``MAX_STREAM``, a set-up answer ``MAX_BODY``; an error body
  is read up to ``MAX_ERROR`` (its first line is the reason shown).
- **Shape**: JSON is strict and at most ``readfile.MAX_JSON_DEPTH`` deep (readfile.loads_json); what the
  server says about itself is recorded cut to ``DEPTH`` levels, ``ITEMS`` items and ``TEXT`` characters
  (``shaped``), with a note naming each cut, so that the results file stays one its readers accept.

A breach is :class:`Refused`; its text is the failure's reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from xpubench import readfile
from xpubench.errors import UserError

MAX_LINE = readfile.MiB             # one server-sent event (a token's event is ~200 bytes)
MAX_STREAM = 64 * readfile.MiB      # one streamed answer, inflated
MAX_BODY = 16 * readfile.MiB        # a set-up answer (/v1/models, /props, /tokenize of 8k tokens: ~100 KB)
MAX_ERROR = 64 << 10                # the part of an error body read (its first line is shown)
DEPTH, ITEMS, TEXT = 8, 32, 256     # what a server's description keeps (results/validate.py allows 24 levels)
HEADERS = {"Accept-Encoding": "identity"}


class Refused(Exception):
    """An answer outside the bounds; the text says which."""


def within(seconds: float):
    """``async with within(s):`` a time limit on the awaits inside, TimeoutError past it, kept in the task that
    awaits. Not ``asyncio.wait_for``: up to Python 3.11 it awaits the work as a task of its own and drops a
    cancellation that lands as that work ends (python/cpython#86296), so the end of a point's telemetry, its
    time limit or a stop could be lost (a serve worker read /metrics every 0.5 s for ever, its point never
    ending)."""
    if sys.version_info >= (3, 11):
        return asyncio.timeout(seconds)
    return _cancel_scope(seconds)


@contextlib.asynccontextmanager
async def _cancel_scope(seconds: float):
    """Python 3.10's ``within``: anyio's cancel scope (httpx runs on anyio), in the same task too."""
    import anyio

    with anyio.fail_after(seconds):
        yield


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= readfile.MiB else f"{n >> 10} KiB"


class _Inflate:
    """Raw body bytes -> the bytes they stand for, a MiB at a time, counted against ``cap``."""

    def __init__(self, encoding: str, cap: int) -> None:
        kind = encoding.strip().lower()
        if kind in ("", "identity"):
            self.z = None
        elif kind in ("gzip", "x-gzip", "deflate"):
            self.z = zlib.decompressobj(16 + zlib.MAX_WBITS if "gzip" in kind else zlib.MAX_WBITS)
        else:
            raise Refused(f"an answer in an encoding xpubench does not read (Content-Encoding: {encoding[:40]})")
        self.left = cap

    def __call__(self, raw: bytes):
        """The pieces ``raw`` inflates to, each at most a MiB; stops once more than ``cap`` came in all."""
        if self.z is None:
            self.left -= len(raw)
            yield raw
            return
        while self.left >= 0:
            try:
                out = self.z.decompress(raw, readfile.MiB)
            except zlib.error as exc:
                raise Refused(f"a compressed answer that does not inflate ({exc})") from None
            raw = self.z.unconsumed_tail
            self.left -= len(out)
            yield out
            if not raw and len(out) < readfile.MiB:    # all of it read, and nothing held back
                return


async def body(response: httpx.Response, cap: int = MAX_BODY, *, cut: bool = False) -> bytes:
    """The whole body, inflated; above ``cap`` bytes: Refused, or with ``cut`` its first ``cap`` bytes."""
    inflate, parts = _Inflate(response.headers.get("content-encoding", ""), cap), []
    async for raw in response.aiter_raw():
        parts += inflate(raw)
        if inflate.left < 0:
            if not cut:
                raise Refused(f"an answer larger than {_size(cap)}")
            break
    return b"".join(parts)[:cap]


async def lines(response: httpx.Response, cap: int = MAX_STREAM):
    """The body's lines (CR, LF or CRLF ends), each at most MAX_LINE bytes, ``cap`` bytes in all."""
    inflate, rest = _Inflate(response.headers.get("content-encoding", ""), cap), b""
    async for raw in response.aiter_raw():
        for piece in inflate(raw):
            parts = (rest + piece).splitlines(keepends=True)
            rest = parts.pop() if parts and not parts[-1].endswith((b"\n", b"\r")) else b""
            if len(rest) > MAX_LINE:
                raise Refused(f"a line longer than {_size(MAX_LINE)}")
            for part in parts:
                yield part.rstrip(b"\r\n")
        if inflate.left < 0:
            raise Refused(f"a stream larger than {_size(cap)}")
    if rest:
        yield rest


def json_of(data: bytes | str) -> Any:
    """Strict JSON at most readfile.MAX_JSON_DEPTH deep; Refused("not JSON (why)" or "JSON nested too deeply")."""
    try:
        return readfile.loads_json(data, "")
    except UserError as exc:
        raise Refused(str(exc).removeprefix(": ")) from None


@dataclass
class Answer:
    """A set-up call's outcome: the status and JSON it answered, or why there is none."""

    status: int | None = None
    value: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    error: str | None = None


async def call(client: httpx.AsyncClient, method: str, url: str, payload: Any = None, *,
               deadline_s: float, cap: int = MAX_BODY, read: Callable[[bytes], Any] | None = None) -> Answer:
    """One set-up request within ``deadline_s`` in all and ``cap`` bytes; its answer read as strict JSON
    (``read``: another reading, which raises Refused); never raises (but for cancellation). An answer whose
    body was refused keeps its status (the server is there) with the reason."""
    answer = Answer()

    async def go() -> None:
        async with client.stream(method, url, json=payload, headers=HEADERS) as r:
            answer.status, answer.headers = r.status_code, {k: v[:TEXT] for k, v in list(r.headers.items())[:ITEMS]}
            data = await body(r, cap)
        if r.status_code == 200 and data.strip():
            answer.value = (read or json_of)(data)

    try:
        async with within(deadline_s):
            await go()
    except TimeoutError:
        answer.error = f"no answer within {deadline_s:g} s"
    except Refused as exc:
        answer.error = str(exc)
    except httpx.HTTPError as exc:
        answer.error = reason(exc)
    return answer


def reason(exc: BaseException) -> str:
    """An exception as one short line; a failed connection as its first cause ("[Errno 111] Connect call
    failed ('127.0.0.1', 9)", where httpx says "All connection attempts failed")."""
    root = exc
    while isinstance(exc, httpx.ConnectError) and (root.__cause__ or root.__context__) is not None:
        root = root.__cause__ or root.__context__
    return " ".join(str(root).split())[:160] or type(exc).__name__


def shaped(value: Any, notes: list[str], at: str = "", depth: int = 0) -> Any:
    """``value`` (decoded JSON) cut to DEPTH levels, ITEMS items per list or object and TEXT characters per
    text, each cut named in ``notes``."""
    if isinstance(value, str):
        if len(value) <= TEXT:
            return value
        notes.append(f"{at or 'a text'} cut to {TEXT} of {len(value):,} characters")
        return value[:TEXT] + "..."
    if not isinstance(value, (dict, list)):
        return value
    if depth >= DEPTH:
        notes.append(f"{at} cut at {DEPTH} levels")
        return None
    items = list(value.items() if isinstance(value, dict) else enumerate(value))
    if len(items) > ITEMS:
        notes.append(f"{at or 'the answer'} cut to {ITEMS} of {len(items):,} items")
    kept = [(shaped(k, notes, at, depth + 1) if isinstance(k, str) else k, shaped(v, notes, f"{at}.{k}".lstrip("."),
                                                                                  depth + 1)) for k, v in items[:ITEMS]]
    return dict(kept) if isinstance(value, dict) else [v for _, v in kept]
