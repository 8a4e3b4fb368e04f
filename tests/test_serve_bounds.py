"""serve/bounded.py, the bounds on what a server sends, and the record's read-back before it is appended
(serve/record.py), without a server: answers made in memory."""

from __future__ import annotations

import asyncio
import gzip
import zlib

import httpx
import pytest

from xpubench.errors import UserError
from xpubench.results.schema import Run
from xpubench.serve import bounded
from xpubench.serve.bounded import Refused
from xpubench.serve.host import Host
from xpubench.serve.record import outcome_of, readable
from xpubench.serve.sample import Sample
from xpubench.serve.sweep import Load, PointRun


class Pieces(httpx.AsyncByteStream):
    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    async def __aiter__(self):
        for piece in self.pieces:
            yield piece


def _answer(pieces: list[bytes], encoding: str = "") -> httpx.Response:
    return httpx.Response(200, headers={"content-encoding": encoding} if encoding else {}, stream=Pieces(pieces))


def _lines(pieces: list[bytes], encoding: str = "", cap: int = bounded.MAX_STREAM) -> list[bytes]:
    async def read():
        return [line async for line in bounded.lines(_answer(pieces, encoding), cap)]
    return asyncio.run(read())


def test_lines_end_at_lf_crlf_or_cr_wherever_the_reads_split_them():
    assert _lines([b"data: a\r", b"\ndata: b\n\nda", b"ta: c\rdata: d"]) == [
        b"data: a", b"", b"data: b", b"", b"data: c", b"data: d"]


def test_a_line_over_its_bound_is_refused():
    with pytest.raises(Refused, match="a line longer than 1 MiB"):
        _lines([b"data: ", *[b"x" * (1 << 19)] * 3])


def test_gzip_and_deflate_answers_are_inflated_and_a_bomb_is_stopped_at_the_cap():
    text = b"data: 1\n\ndata: 2\n"
    assert _lines([gzip.compress(text)], "gzip") == [b"data: 1", b"", b"data: 2"]
    assert _lines([zlib.compress(text)], "deflate") == [b"data: 1", b"", b"data: 2"]
    bomb = gzip.compress(b"data: 0\n" * (4 << 20))          # 32 MiB of lines in ~100 KB
    with pytest.raises(Refused, match="a stream larger than 8 MiB"):
        _lines([bomb[i:i + 65536] for i in range(0, len(bomb), 65536)], "gzip", cap=8 << 20)
    with pytest.raises(Refused, match="Content-Encoding: br"):
        _lines([b"x"], "br")
    with pytest.raises(Refused, match="does not inflate"):
        _lines([b"not gzip at all"], "gzip")


def test_a_body_is_refused_over_its_cap_or_cut_for_an_error_line():
    big = [b"e" * 65536] * 4
    with pytest.raises(Refused, match="an answer larger than 64 KiB"):
        asyncio.run(bounded.body(_answer(big), 65536))
    assert asyncio.run(bounded.body(_answer(big), 65536, cut=True)) == b"e" * 65536


def test_json_is_strict_and_of_bounded_depth():
    assert bounded.json_of(b'{"a": [1, 2.5]}') == {"a": [1, 2.5]}
    for text, said in ((b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply"), (b"{nope", "not JSON"),
                       (b"NaN", "not JSON")):
        with pytest.raises(Refused, match=said):
            bounded.json_of(text)


def test_a_description_is_shaped_and_every_cut_is_named():
    notes: list[str] = []
    deep: dict = {"leaf": 1}
    for _ in range(20):
        deep = {"a": deep}
    got = bounded.shaped({"models": ["m" * 300], "meta": deep, "many": list(range(100)), "n": 5}, notes)
    assert got["models"] == ["m" * 256 + "..."] and got["many"] == list(range(32)) and got["n"] == 5
    assert notes == ["models.0 cut to 256 of 300 characters", "meta.a.a.a.a.a.a.a cut at 8 levels",
                     "many cut to 32 of 100 items"]


def _run(host: Host, point: PointRun) -> Run:
    outcome = outcome_of(host, point, input_len=4, output_len=2, endpoint="/v1/completions", slo=None,
                         usd_per_hour=None)
    return Run(case={"workload": "m", "backend": "http", "device": "remote", "mode": "serve", "precision": "as-served",
                     "users": 1, "key": "m/http/remote/serve/as-served/c1"}, status=outcome.status,
               message=outcome.message, metrics=outcome.metrics, samples=outcome.samples, artifacts=outcome.artifacts)


def test_a_record_its_readers_would_refuse_is_not_appended():
    deep: dict = {"leaf": 1}
    for _ in range(30):          # deeper than results/validate.py allows, past serve/bounded.py's shaping
        deep = {"a": deep}
    host = Host(url="http://127.0.0.1:9", server="s", model="m", provenance={"url": "http://127.0.0.1:9", "meta": deep})
    sample = Sample(start=0.0, ttft_s=0.1, e2e_s=0.2, stamps=[0.1, 0.15], output_tokens=2)
    point = PointRun(Load(1, requests=1, warmup=0), samples=[sample], window_s=0.2)
    with pytest.raises(UserError, match=r"not appended.*artifacts.server.meta(.a)+ is nested more than 24 levels"):
        readable(_run(host, point))
    host.provenance = {"url": host.url}
    assert readable(_run(host, point)).status == "ok"


def test_an_answer_inflating_past_a_mib_per_read_loses_nothing():
    text = b"".join(b"data: %d\n" % i for i in range(300_000))      # ~3 MiB, from one small read
    assert _lines([gzip.compress(text)], "gzip") == [b"data: %d" % i for i in range(300_000)]
