"""Credentials never travel (issue 51 item 6): a password in ``serve --url http://user:password@host``, an
``--api-key``, a token in a recorded environment variable reach the server (as the ``Authorization``
header) and nothing else: no record, report, site page, CSV/JSON/Markdown output or error line holds them
(results/redact.py, one function used where URLs and commands are recorded and where errors are printed)."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from bad_input_doc import Case, check_row, run_case
from test_serve_llamacpp import tiny_gguf  # noqa: F401 (a fixture: a tiny GGUF with a vocabulary)

from xpubench.cli import main
from xpubench.results.redact import redacted, split_credentials
from xpubench.serve.server import free_port

SECRET = "Pa55w0rdXyZ"          # the password in --url
KEY = "sk-KeyQ7Rt9"             # --api-key
TOKEN = "tok-EnvW4v2"           # a recorded environment variable's
EVERY = (SECRET, KEY, TOKEN, base64.b64encode(f"alice:{SECRET}".encode()).decode())


@pytest.mark.parametrize("text, shown", [
    (f"http://alice:{SECRET}@127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    (f"--url https://alice:{SECRET}@h/x", "--url https://h/x"),
    ("https://a:b@c@h:1/?q", "https://h:1/?q"),                          # the last @ ends the user information
    (f"--api-key {KEY} --port 8", "--api-key REDACTED --port 8"),
    (f"--api-key={KEY}", "--api-key=REDACTED"),
    (f"--hf-token '{KEY} x'", "--hf-token REDACTED"),
    (f"-H 'Authorization: Bearer {KEY}'", "-H 'Authorization: Bearer REDACTED'"),
    (f'--header="X-Api-Key: {KEY}"', '--header="X-Api-Key: REDACTED"'),
    (f"Proxy-Authorization: Basic {KEY}", "Proxy-Authorization: Basic REDACTED"),
    (f"Cookie: session={KEY}", "Cookie: REDACTED"),
    (f"bearer {KEY}", "bearer REDACTED"),
    (f"https://h/v1?token={KEY}&n=1&api_key={KEY}#x", "https://h/v1?token=REDACTED&n=1&api_key=REDACTED#x"),
    (f"https://h/?sig={KEY}&key={KEY}", "https://h/?sig=REDACTED&key=REDACTED"),
    (f"HF_TOKEN={TOKEN} OPENAI_API_KEY='{TOKEN}' DB_PASSWORD={TOKEN} python x",
     "HF_TOKEN=REDACTED OPENAI_API_KEY=REDACTED DB_PASSWORD=REDACTED python x"),
])
def test_every_form_of_a_credential_is_redacted(text, shown):
    assert redacted(text) == shown
    assert redacted(shown) == shown


@pytest.mark.parametrize("text", [
    "OMP_NUM_THREADS=4 XLA_FLAGS=--xla_force_host_platform_device_count=8", "--key-options 3", "monkey=3",
    "--target accuracy=0.975", "matmul/numpy/cpu/matmul/fp32/n2048", "http://127.0.0.1:8000/v1/completions",
    "tokenizer: llama", "--no-auth --port 8", "a@b.c wrote it",
])
def test_what_is_not_a_credential_is_kept(text):
    assert redacted(text) == text


def test_the_url_is_split_from_its_credentials_percent_decoded():
    assert split_credentials("http://al%20ice:p%40ss@[::1]:80/x") == ("http://[::1]:80/x", ("al ice", "p@ss"))
    assert split_credentials("http://h:1/x") == ("http://h:1/x", None)


def test_a_recorded_environment_variable_holds_no_secret():
    from xpubench.devices import envvars

    env = envvars.recorded({"TPU_API_KEY": TOKEN, "XLA_FLAGS": f"--flag --token={TOKEN}", "OMP_NUM_THREADS": "4",
                            "HF_TOKEN": TOKEN})
    assert env == {"OMP_NUM_THREADS": "4", "TPU_API_KEY": "REDACTED", "XLA_FLAGS": "--flag --token=REDACTED"}


class _Server(BaseHTTPRequestHandler):
    """An OpenAI-style completions server that answers only with the right Authorization header."""

    protocol_version = "HTTP/1.0"
    expected = ""
    seen: ClassVar[list[str]] = []

    def log_message(self, *args) -> None:
        pass

    def _allowed(self) -> bool:
        _Server.seen.append(self.headers.get("Authorization") or "")
        if self.headers.get("Authorization") == _Server.expected:
            return True
        self.send_response(401)                     # and the credentials echoed back, as a careless server might
        self.end_headers()
        self.wfile.write(f"unauthorized: {self.headers.get('Authorization')}\n".encode())
        return False

    def do_GET(self) -> None:
        if self._allowed():
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps({"data": [{"id": "auth-model"}]}).encode())

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self._allowed():
            return
        if not self.path.endswith("/completions"):
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i in range(3):
            self.wfile.write(f"data: {json.dumps({'choices': [{'text': f' t{i}', 'index': 0}]})}\n\n".encode())
        usage = {"choices": [{"text": "", "index": 0}], "usage": {"prompt_tokens": 4, "completion_tokens": 3}}
        self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Server.seen = []
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def _said(capsys) -> str:
    got = capsys.readouterr()
    return got.out + got.err


SWEEP = ["-c", "1", "--requests", "2", "--warmup", "0", "--input-len", "4", "--output-len", "3", "--label", "m"]


def _outputs(files: list[str], folder: Path, capsys, pages: bool = True) -> list[str]:
    """What report (every format to stdout; with ``pages``, its HTML and Markdown files), compare and site
    print and write of ``files``."""
    said = []
    for fmt in ("csv", "json", "jsonl", "md"):
        assert main(["report", *files, "-o", "-", "--format", fmt]) == 0
        said.append(_said(capsys))
        if len(files) > 1:
            assert main(["compare", *files[:2], "--format", {"jsonl": "html"}.get(fmt, fmt)]) == 0
            said.append(_said(capsys))
    for name in ("report.html", "report.md")[:2 * pages]:
        assert main(["report", *files, "-o", str(folder / name)]) == 0
    assert main(["site", str(Path(files[0]).parent), "-o", str(folder / "site"), "-j", "1"]) == 0
    return said + [_said(capsys)]


def _leaks(folder: Path, said: list[str]) -> set[tuple[str, str]]:
    written = [p for p in folder.rglob("*") if p.is_file()]
    assert len(written) > 5 and any(p.suffix == ".csv" for p in written)
    return ({(str(p), s) for p in written for s in EVERY if s.encode() in p.read_bytes()}
            | {(f"printed {i}", s) for i, text in enumerate(said) for s in EVERY if s in text})


@pytest.mark.slow   # a run's worker process
def test_a_password_in_the_url_or_a_token_in_the_environment_is_in_no_output(server, tmp_path, capsys, monkeypatch,
                                                                             detected_once):
    """The password goes to the server, and nowhere else: every file serve, run, report, compare and site
    write, every line they print, an error that names the URL."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TPU_API_KEY", TOKEN)                       # recorded in every fingerprint's "env"
    results = tmp_path / "results"
    results.mkdir()
    _Server.expected = "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()
    said = []
    for name in ("a", "b"):
        assert main(["serve", "--url", f"http://alice:{SECRET}@127.0.0.1:{server}", *SWEEP,
                     "-o", str(results / f"{name}.jsonl")]) == 0
        said.append(_said(capsys))
    assert set(_Server.seen) == {_Server.expected}                 # every request carried them
    assert main(["run", "--selftest", "ok", "-b", "numpy", "--processes", "1", "--no-progress",
                 "-o", str(results / "run.jsonl")]) == 0
    said.append(_said(capsys))
    said += _outputs([str(results / n) for n in ("a.jsonl", "b.jsonl", "run.jsonl")], tmp_path, capsys)
    assert main(["serve", "--url", f"http://alice:{SECRET}@127.0.0.1:{free_port()}", "-o",
                 str(tmp_path / "x.jsonl")]) == 2                   # an error names the URL
    said.append(_said(capsys))
    assert "cannot reach the server" in said[-1]
    assert not _leaks(tmp_path, said)
    record = json.loads((results / "a.jsonl").read_text().splitlines()[0])
    assert record["case"]["options"]["url"] == f"http://127.0.0.1:{server}"   # the address, without its user
    assert record["fingerprint"]["env"]["TPU_API_KEY"] == "REDACTED"


def test_an_api_key_is_sent_as_a_bearer_token_and_is_in_no_output(server, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    _Server.expected = f"Bearer {KEY}"
    assert main(["serve", "--url", f"http://127.0.0.1:{server}", "--api-key", KEY, *SWEEP,
                 "-o", str(results / "s.jsonl")]) == 0
    assert set(_Server.seen) == {_Server.expected}
    said = [_said(capsys), *_outputs([str(results / "s.jsonl")], tmp_path, capsys, pages=False)]
    assert not _leaks(tmp_path, said)


@pytest.mark.slow   # a real llama-server
def test_a_real_llama_server_with_an_api_key_is_measured_and_the_key_kept_nowhere(tiny_gguf, tmp_path,  # noqa: F811
                                                                                   capsys):
    """llama-server --api-key checks the Bearer token: with the key the points complete, with another
    every request is refused (401); neither the records nor the output hold the key."""
    import dataclasses

    from xpubench import backends
    from xpubench.serve.server import Server

    spec = backends.get("llamacpp").server()
    spec = dataclasses.replace(spec, arguments=(*spec.arguments, "--api-key", KEY))
    server = Server(spec, str(tiny_gguf), name="tiny", slots=1, context=64, fmt="q8_0", threads=1)
    assert KEY in server.command and KEY not in server.command_line
    with server:
        for key, name in ((KEY, "right"), ("sk-wrong", "wrong")):
            assert main(["serve", "--url", server.url, "--api-key", key, "-c", "1", "--requests", "2", "--warmup",
                         "0", "--input-len", "8", "--output-len", "4", "-o", str(tmp_path / f"{name}.jsonl")]) == 0
    said = _said(capsys)
    right, wrong = (json.loads((tmp_path / f"{n}.jsonl").read_text()) for n in ("right", "wrong"))
    assert right["status"] == "ok" and right["metrics"]["completed"] == 2
    assert wrong["status"] == "error" and "401" in wrong["message"]
    assert not any(KEY in text for text in (said, *(p.read_text() for p in tmp_path.glob("*.jsonl"))))


def test_a_server_that_refuses_the_credentials_and_echoes_them_gets_them_recorded_nowhere(server, tmp_path, capsys):
    _Server.expected = "Bearer right"
    assert main(["serve", "--url", f"http://127.0.0.1:{server}", "--api-key", KEY, *SWEEP,
                 "-o", str(tmp_path / "s.jsonl")]) == 0
    text = (tmp_path / "s.jsonl").read_text()
    record = json.loads(text.splitlines()[-1])
    assert record["status"] == "error" and "HTTP 401: unauthorized: Bearer REDACTED" in record["message"]
    assert KEY not in text + _said(capsys)


def doc_cases(folder: Path) -> list[Case]:
    """docs/bad-input.md's credential rows: each error line names the URL without what it must not show."""
    port = 9                    # discard: nothing listens there (a fixed port: the doc's row stays the same)
    return [
        Case("a password in an unreachable --url", f"xpubench serve --url http://alice:{SECRET}@127.0.0.1:{port} "
             f"-o {folder}/s.jsonl", f"--url http://127.0.0.1:{port}: cannot reach the server"),
        Case("a password in a --url that is not http", f"xpubench serve --url ftp://alice:{SECRET}@host",
             "--url ftp://host: give an http:// or https:// address"),
        Case("a key in the --url's query", f"xpubench serve --url http://host/v1?api_key={KEY}",
             "without a ?query or #fragment (a key: --api-key), got http://host/v1?api_key=REDACTED"),
        Case("a password in --url and --api-key", f"xpubench serve --url http://alice:{SECRET}@host --api-key {KEY}",
             "give the credentials once"),
        Case("--api-key without --url", f"xpubench serve --server llamacpp --api-key {KEY}",
             "a key (--api-key) goes with --url"),
    ]


@pytest.mark.parametrize("index", range(5))
def test_an_error_line_holds_no_credential(index, tmp_path):
    case = doc_cases(tmp_path)[index]
    outcome = run_case(case)
    check_row(case, outcome)
    assert not any(s in outcome.err + outcome.out for s in EVERY)
