"""A hostile OpenAI-compatible server for the ``xpubench serve`` tests: a raw asyncio socket server on
127.0.0.1, in a thread of the test process, that answers as a broken or malicious server would.

``http://127.0.0.1:PORT/<behaviour>`` is the server's URL for one behaviour (every path under it:
``/v1/models``, ``/props``, ``/version``, ``/tokenize``, ``/v1/completions``, ``/v1/chat/completions``):

- ``ok``: a healthy server (4 tokens and a usage field per answer; every prompt cut to the same text);
- ``deep``: JSON nested 100,000 deep in its description and in every stream event;
- ``odd``: a description of unexpected types (``data`` a string, a model id an object, ``/props``'s
  ``default_generation_settings`` a list, ``/version`` a list) and stream events whose fields are lists;
- ``longline``: an answer that is one unterminated 512 MB ``data:`` line (sent while the client reads);
- ``bigbody``: a 512 MB description and a 512 MB error body (HTTP 500) for every request;
- ``gzip``: gzip-compressed answers, about 0.5 MB on the wire, each inflating to 512 MB;
- ``trickle``: every answer, status line included, one byte every 2 s; ``tricklestream``: only the
  streamed answers (the description is answered at once);
- ``hugeusage``: a usage field of a 400-digit completion count;
- ``deepmeta``: model metadata nested 60 deep (readable JSON, deeper than a results record may hold);
- ``bigid``: one model id of 8 MB.

Bounded: it listens on the loopback only, each connection ends after ``lifetime_s`` (a trickle too), the
server answers at most ``max_connections`` connections, and it stops when its ``with`` block ends.
"""

from __future__ import annotations

import asyncio
import json
import struct
import threading
import zlib
from typing import Self

HUGE = 512 << 20          # bytes of an endless line, a large body, a bomb's inflated size
PIECE = 1 << 20
TOKENS = [{"choices": [{"text": f" t{i}", "index": 0}]} for i in range(4)]
USAGE = {"choices": [{"text": "", "index": 0}], "usage": {"prompt_tokens": 7, "completion_tokens": 4}}


def _deep(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def _bomb(prefix: bytes) -> bytes:
    """``prefix`` then zeros up to HUGE bytes as one gzip member of about 0.5 MB, made without holding HUGE: each
    MiB of zeros after a full flush compresses to the same block, so one block is repeated."""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros, pieces = bytes(PIECE), HUGE // PIECE
    first = z.compress(prefix) + z.flush(zlib.Z_FULL_FLUSH)
    block = z.compress(zeros) + z.flush(zlib.Z_FULL_FLUSH)
    crc = zlib.crc32(prefix)
    for _ in range(pieces):
        crc = zlib.crc32(zeros, crc)
    end = z.flush(zlib.Z_FINISH)[:-8]     # the last block, less the trailer written for one piece
    return first + block * pieces + end + struct.pack("<II", crc, (len(prefix) + HUGE) & 0xFFFFFFFF)


def _nested_meta(levels: int) -> dict:
    meta: dict = {"leaf": 1}
    for _ in range(levels):
        meta = {"a": meta}
    return meta


def _sse(*events) -> bytes:
    return b"".join(b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n" for e in events)


class HostileServer:
    """``with HostileServer() as server: server.url("deep")``."""

    def __init__(self, lifetime_s: float = 30.0, max_connections: int = 400) -> None:
        self.lifetime_s, self.left = lifetime_s, max_connections
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._bombs: dict[bytes, bytes] = {}
        self._thread = threading.Thread(target=self.loop.run_forever, name="hostile-server", daemon=True)

    def url(self, behaviour: str) -> str:
        return f"http://127.0.0.1:{self.port}/{behaviour}"

    def __enter__(self) -> Self:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(asyncio.start_server(self._serve, "127.0.0.1", 0), self.loop)
        self.server = started.result(10)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc) -> None:
        async def stop() -> None:
            self.server.close()
            for task in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
                task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    # ---- one connection ------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.left -= 1
        try:
            if self.left >= 0:
                await asyncio.wait_for(self._answer(reader, writer), self.lifetime_s)
        except (asyncio.TimeoutError, asyncio.CancelledError, OSError, ValueError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")   # at most the stream's limit (64 KiB)
        method, path = head.split(b" ", 2)[:2]
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        await reader.readexactly(min(length, 1 << 20))
        behaviour, _, rest = path.decode().strip("/").partition("/")
        await getattr(self, f"_{behaviour}", self._ok)(writer, method.decode(), rest)

    async def _send(self, writer, status: int = 200, body: bytes = b"", kind: str = "application/json",
                    headers: str = "") -> None:
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nConnection: close\r\n{headers}\r\n".encode())
        writer.write(body)
        await writer.drain()

    async def _flood(self, writer, first: bytes, piece: bytes) -> None:
        """``first``, then ``piece`` until HUGE bytes went (or the client hung up)."""
        writer.write(first)
        for _ in range(HUGE // len(piece)):
            writer.write(piece)
            await writer.drain()

    # ---- the behaviours ------------------------------------------------------------------------------

    async def _ok(self, writer, method: str, rest: str, usage: dict | bytes = USAGE) -> None:
        if rest == "v1/models" or method == "HEAD":
            await self._send(writer, body=json.dumps({"data": [{"id": "hostile"}]}).encode())
        elif rest in ("tokenize", "detokenize"):     # every prompt cut to "a hostile prompt"
            said = {"tokens": list(range(4096)), "content": "a hostile prompt"}
            await self._send(writer, body=json.dumps(said).encode())
        elif rest.endswith("completions"):
            await self._send(writer, body=_sse(*TOKENS, usage, b"[DONE]"), kind="text/event-stream")
        else:
            await self._send(writer, 404, b"not found", "text/plain")

    async def _deep(self, writer, method: str, rest: str) -> None:
        if rest.endswith("completions"):
            await self._send(writer, body=_sse(TOKENS[0], _deep(100_000), b"[DONE]"), kind="text/event-stream")
        else:
            await self._send(writer, body=_deep(100_000))

    async def _odd(self, writer, method: str, rest: str) -> None:
        answers = {"v1/models": {"data": [{"id": {"not": "text"}, "meta": [1, 2]}, "x"]},
                   "props": {"default_generation_settings": [1, 2], "build_info": ["b"], "total_slots": "many"},
                   "version": ["0.1"]}
        if rest.endswith("completions"):
            events = [{"choices": "x"}, {"choices": [{"text": ["a"], "delta": "b"}]}, {"usage": [1]},
                      {"choices": [{"text": " t"}], "usage": {"completion_tokens": "4", "prompt_tokens": -3}}]
            await self._send(writer, body=_sse(*events, b"[DONE]"), kind="text/event-stream")
        else:
            await self._send(writer, body=json.dumps(answers.get(rest, "odd")).encode())

    async def _longline(self, writer, method: str, rest: str) -> None:
        if rest.endswith("completions"):
            await self._send(writer, kind="text/event-stream")
            await self._flood(writer, b"data: ", b"x" * PIECE)
        else:
            await self._ok(writer, method, rest)

    async def _bigbody(self, writer, method: str, rest: str) -> None:
        if rest.endswith("completions"):
            await self._send(writer, 500, kind="text/plain")
            await self._flood(writer, b"", b"e" * PIECE)
        else:
            await self._send(writer)
            await self._flood(writer, b'{"data": [{"id": "hostile"}], "pad": "', b"p" * PIECE)

    async def _gzip(self, writer, method: str, rest: str) -> None:
        stream = rest.endswith("completions")
        prefix = b"data: " if stream else b'{"data": [{"id": "hostile"}], "pad": "'
        if prefix not in self._bombs:
            self._bombs[prefix] = _bomb(prefix)
        bomb = self._bombs[prefix]
        await self._send(writer, body=bomb, kind="text/event-stream" if stream else "application/json",
                         headers=f"Content-Encoding: gzip\r\nContent-Length: {len(bomb)}\r\n")

    async def _trickle(self, writer, method: str, rest: str) -> None:
        answer = b"HTTP/1.1 200 X\r\nContent-Type: text/event-stream\r\n\r\n" + _sse(*TOKENS, USAGE, b"[DONE]")
        for byte in answer:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(2.0)

    async def _tricklestream(self, writer, method: str, rest: str) -> None:
        await (self._trickle if rest.endswith("completions") else self._ok)(writer, method, rest)

    async def _hugeusage(self, writer, method: str, rest: str) -> None:
        usage = b'{"choices": [{"text": ""}], "usage": {"prompt_tokens": 7, "completion_tokens": 1' + b"0" * 400 + b"}}"
        await self._ok(writer, method, rest, usage=usage)

    async def _deepmeta(self, writer, method: str, rest: str) -> None:
        if rest == "v1/models":
            await self._send(writer, body=json.dumps({"data": [{"id": "hostile", "meta": _nested_meta(60)}]}).encode())
        else:
            await self._ok(writer, method, rest)

    async def _bigid(self, writer, method: str, rest: str) -> None:
        if rest == "v1/models":
            await self._send(writer, body=json.dumps({"data": [{"id": "m" * (8 << 20)}]}).encode())
        else:
            await self._ok(writer, method, rest)
