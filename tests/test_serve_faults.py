"""The fault cases of ``xpubench serve`` against an in-process fake OpenAI server (one behaviour per path):
every fault ends its requests with a reason, the point records it, and the sweep goes on."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from xpubench.cli import main
from xpubench.results import store
from xpubench.serve.client import COMPLETIONS, payload
from xpubench.serve.host import Host
from xpubench.serve.record import outcome_of
from xpubench.serve.server import free_port
from xpubench.serve.sweep import Load, measure


def _event(text: str, usage: dict | None = None) -> bytes:
    body = {"choices": [{"text": text, "index": 0}]}
    if usage:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n".encode()


class Fake(BaseHTTPRequestHandler):
    """POST /<behaviour>/v1/completions streams as that behaviour says."""

    protocol_version = "HTTP/1.0"     # the body ends when the connection closes
    seen = 0

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self._reply(200, json.dumps({"data": [{"id": "fake-model"}]}).encode(), "application/json")

    def _reply(self, status: int, body: bytes, kind: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, chunks: list[bytes], gap_s: float = 0.0) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for c in chunks:
            self.wfile.write(c)
            self.wfile.flush()
            time.sleep(gap_s)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        how = self.path.split("/")[1]
        tokens = [_event(f" t{i}") for i in range(4)]
        done = [_event("", {"prompt_tokens": 7, "completion_tokens": 4}), b"data: [DONE]\n\n"]
        if how == "ok":
            self._stream(tokens + done)
        elif how == "status500":
            self._reply(500, b"internal error: the model fell over\n")
        elif how == "nonjson":
            self._stream(tokens[:1] + [b"data: {not json\n\n"])
        elif how == "closed":
            self._stream(tokens[:2])                 # the connection closes, no [DONE]
        elif how == "nousage":
            self._stream(tokens + [b"data: [DONE]\n\n"])
        elif how == "forever":
            self._stream([_event(" x")] * 400, gap_s=0.01)
        elif how == "slow":
            self._stream(tokens + done, gap_s=0.05)
        elif how == "interrupt" and self.path.endswith("/v1/completions"):   # Ctrl-C with the 3rd request
            Fake.seen += 1
            if Fake.seen == 3:   # the stop goes to the command, which passes it to the point's worker meanwhile
                os.kill(os.getpid(), signal.SIGINT)
            self._stream(tokens + done, gap_s=0.5 if Fake.seen >= 3 else 0.05)
        elif how == "errorevent":
            self._stream(tokens[:1] + [b'data: {"error": {"message": "context full"}}\n\n'])


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:   # a client that hung up (a timeout): expected
        pass


@pytest.fixture(scope="module")
def fake_url():
    server = QuietServer(("127.0.0.1", free_port()), Fake)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _point(url: str, *, requests: int = 3, concurrency: int = 2, max_tokens: int = 4, **kw):
    body = payload(COMPLETIONS, "fake-model", "hello", max_tokens, True)
    load = Load(concurrency, requests=requests, warmup=0, **kw)
    return measure(url + COMPLETIONS, [], [body] * requests, load)


def test_a_healthy_stream_is_measured_with_the_usage_counts(fake_url):
    run = _point(f"{fake_url}/ok")
    assert [s.ok for s in run.samples] == [True] * 3
    s = run.samples[0]
    assert (s.input_tokens, s.output_tokens, s.counted, len(s.stamps)) == (7, 4, "usage", 4)
    assert 0 < s.ttft_s <= s.e2e_s and run.window_s > 0


def test_a_500_is_a_failure_with_its_status_and_body(fake_url):
    run = _point(f"{fake_url}/status500")
    assert {s.error for s in run.samples} == {"HTTP 500: internal error: the model fell over"}


def test_non_json_in_the_stream_is_a_failure(fake_url):
    run = _point(f"{fake_url}/nonjson")
    assert all(s.error.startswith("not JSON (Expecting property name") and "in the stream: '{not json'" in s.error
               for s in run.samples)


def test_a_stream_closed_before_done_is_a_failure(fake_url):
    run = _point(f"{fake_url}/closed")
    assert {s.error for s in run.samples} == {"stream closed before [DONE] after 2 chunks"}


def test_an_error_event_in_the_stream_is_a_failure(fake_url):
    run = _point(f"{fake_url}/errorevent")
    assert {s.error for s in run.samples} == {"error event in the stream: context full"}


def test_without_a_usage_field_the_chunks_are_counted(fake_url):
    run = _point(f"{fake_url}/nousage")
    assert all(s.ok and s.output_tokens == 4 and s.counted == "chunks" and s.input_tokens is None
               for s in run.samples)


def test_an_endless_stream_hits_the_request_timeout(fake_url):
    run = _point(f"{fake_url}/forever", requests=2, max_tokens=1000, request_timeout_s=0.5)
    assert all(s.timed_out and s.error.startswith("timed out after 0.5 s") for s in run.samples)


def test_the_point_time_limit_cuts_what_is_in_flight(fake_url):
    run = _point(f"{fake_url}/forever", requests=4, concurrency=2, max_tokens=1000, request_timeout_s=30,
                 point_timeout_s=0.6)
    assert len(run.samples) == 2     # the two users' first requests were in flight; nothing else was sent
    assert all(s.timed_out and "point's time limit (0.6 s)" in s.error for s in run.samples)
    # what was still waiting then, named in one line (the point's warning): both users, mid-stream
    assert run.cut.startswith("cut by the point's time limit (0.6 s) with 2 requests in flight; waiting then: "
                              "2 x _closed.user at serve/client.py:") and "_stream (awaits " in run.cut
    assert "\n" not in run.cut and "Traceback" not in run.cut
    outcome = outcome_of(Host(url=fake_url, server="fake", model="fake-model", provenance={}), run, input_len=1,
                         output_len=1000, endpoint=COMPLETIONS, slo=None, usd_per_hour=None)
    assert run.cut in outcome.metrics["warning"]


def test_an_unreachable_server_is_a_failure_not_an_exception():
    run = _point(f"http://127.0.0.1:{free_port()}")
    assert all(s.error.startswith("cannot connect") for s in run.samples)


def _sweep(url: str, out, *more: str) -> int:
    return main(["serve", "--url", url, "--input-len", "4", "--output-len", "4", "--warmup", "0", *more,
                 "-o", str(out)])


def test_a_failing_point_is_recorded_and_the_sweep_goes_on(fake_url, tmp_path):
    out = tmp_path / "serve.jsonl"
    # every request of each point is answered 500: each point is a line, an error result, and the next one runs
    assert _sweep(f"{fake_url}/status500", out, "-c", "1,2", "--requests", "2") == 0
    loaded = store.load_file(out)
    assert [(r.status, r.case["users"], r.metrics["failed"]) for r in loaded.runs] == [("error", 1, 2),
                                                                                        ("error", 2, 2)]
    assert "2 x HTTP 500" in loaded.runs[0].message
    assert _sweep(f"{fake_url}/ok", tmp_path / "ok.jsonl", "-c", "1", "--requests", "2") == 0
    [ok] = store.load_file(tmp_path / "ok.jsonl").runs
    assert ok.metrics["tokens_counted"] == "usage field" and len(ok.artifacts["requests"]) == 2
    assert ok.samples["e2e_s"] and ok.samples["itl_s"]


@pytest.fixture
def ctrl_c_raises():
    """SIGINT as Python's KeyboardInterrupt for the test (a test runner's worker, xdist's, may ignore it)."""
    try:
        earlier = signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:   # not the main thread: no signal handler can be set here
        pytest.skip("SIGINT handlers are set in the main thread only, and this test runs in another")
    yield
    signal.signal(signal.SIGINT, earlier)


def test_ctrl_c_keeps_what_was_measured_and_ends_the_sweep(fake_url, tmp_path, ctrl_c_raises, capsys):
    """Ctrl-C with the first point's third request: the point's worker is passed the stop, its two finished
    requests are recorded (the third was in flight), the second point never starts, and --resume would
    measure the cut point again (it is ``retryable``)."""
    from xpubench.results.schema import retryable

    out = tmp_path / "serve.jsonl"
    Fake.seen = 0
    assert _sweep(f"{fake_url}/interrupt", out, "-c", "1,2", "--requests", "20") == 130
    [run] = store.load_file(out).runs
    assert run.status == "ok" and run.metrics["interrupted"] is True and retryable(run)
    assert run.metrics["completed"] == 2 and run.metrics["failed"] == 0      # the third was in flight
    assert "interrupted (Ctrl-C)" in run.metrics["warning"]
    assert f"xpubench serve --resume {out}` measures the points it lacks" in " ".join(capsys.readouterr().out.split())


def test_a_duration_stops_new_requests(fake_url):
    run = _point(f"{fake_url}/slow", requests=50, concurrency=1, duration_s=0.5)   # ~0.2 s per request
    assert 1 <= len(run.samples) < 10 and all(s.ok for s in run.samples)


def test_open_loop_points_and_repeated_sweeps_are_recorded_as_processes(fake_url, tmp_path):
    out = tmp_path / "serve.jsonl"
    assert _sweep(f"{fake_url}/ok", out, "-c", "2", "--rate", "40", "--requests", "6", "--repeat", "2") == 0
    loaded = store.load_file(out)
    assert [(r.process, r.processes) for r in loaded.runs] == [(0, 2), (0, 2), (1, 2), (1, 2)]
    keys = [r.key for r in loaded.results]
    assert keys == ["fake-model/http/remote/serve/as-served/c2/4/4/completions",
                    "fake-model/http/remote/serve/as-served/c2/r40/4/4/completions"]
    folded = loaded.results[1]
    assert folded.status == "ok" and folded.metrics["processes"] == 2 and len(folded.samples["e2e_s"]) == 12
    assert folded.case.rate == 40.0 and folded.metrics["request_rate"] == 40.0
    starts = [r["start_s"] for r in folded.runs[0].artifacts["requests"]]
    assert len(starts) == 6 and max(starts) > 0      # arrivals spread over time, not all at once
    first, again = (r.artifacts["requests"] for r in loaded.runs[:3:2])   # each round its own prompts and arrivals
    assert [q["start_s"] for q in first] != [q["start_s"] for q in again]


def test_a_url_sweep_from_the_command_line_records_the_server(fake_url, tmp_path, capsys):
    out = tmp_path / "url.jsonl"
    assert main(["serve", "--url", f"{fake_url}/ok", "-c", "1", "--requests", "2", "--warmup", "0",
                 "--input-len", "4", "--output-len", "4", "--slo", "ttft=5s", "-o", str(out)]) == 0
    [run] = store.load_file(out).runs
    assert run.status == "ok" and run.case["device"] == "remote" and run.metrics["model"] == "fake-model"
    assert run.artifacts["server"]["models"] == ["fake-model"] and "server_header" in run.artifacts["server"]
    assert "did not cut prompts to tokens with /tokenize" in run.metrics["warning"]   # words stand for tokens
    assert "serves 1 concurrent user within TTFT 5 s for 90% of requests" in " ".join(capsys.readouterr().out.split())


def test_a_stream_past_max_tokens_is_cut_not_held_until_the_time_limit(fake_url):
    run = _point(f"{fake_url}/forever", requests=2, max_tokens=4, request_timeout_s=30)
    assert {s.error for s in run.samples} == {"more than 24 chunks of text for max_tokens 4"}
    assert all(len(s.stamps) == 25 for s in run.samples)


def test_what_a_cut_point_waited_for_names_a_future_nobody_resolves():
    import asyncio

    from xpubench.serve.pending import described

    async def stuck(never: asyncio.Future) -> None:
        await never

    async def both(task: asyncio.Task) -> None:
        await asyncio.gather(task)

    async def go() -> str:
        never = asyncio.get_running_loop().create_future()
        waiting = asyncio.ensure_future(stuck(never))
        gathering = asyncio.ensure_future(both(waiting))   # waits for a task named on its own: left out
        sleeping = asyncio.ensure_future(asyncio.sleep(30))
        await asyncio.sleep(0)
        said = described({waiting, gathering, sleeping})
        for task in (waiting, gathering, sleeping):
            task.cancel()
        await asyncio.gather(waiting, gathering, sleeping, return_exceptions=True)
        return said

    said = asyncio.run(go())
    assert "1 x test_what_a_cut_point_waited_for_names_a_future_nobody_resolves.stuck at tests/test_serve_faults.py:" \
        in said and " stuck (awaits Future)" in said
    assert "1 x sleep at asyncio/tasks.py:" in said and said.count(" x ") == 2
