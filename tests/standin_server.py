"""A stand-in for vLLM's and SGLang's servers, which cannot be installed on a CPU test machine: the same
command lines (``vllm serve MODEL --port ...``, ``python -m sglang.launch_server --model-path MODEL --port
...``), the same routes (``/health`` once "loaded", ``/version`` or ``/get_server_info``, ``/v1/models``
under the served name, ``/tokenize`` and ``/detokenize``, ``/metrics`` in Prometheus text under each
one's metric names) and the OpenAI API's streamed ``/v1/completions`` and ``/v1/chat/completions``, each
token a server-sent event with usage at the end. A test puts it on PATH as ``vllm`` or on PYTHONPATH as
the ``sglang`` package (``install``) and tells it what to do through the environment:

- ``STANDIN_EXIT_AT_START=1``: print an error and exit 1 before listening (a server that cannot start);
- ``STANDIN_DIE_AFTER=N``: exit at once (status 3) when the N-th generation request arrives (a server that
  dies mid-sweep);
- ``STANDIN_TOKEN_S``: the seconds between two tokens (default 0.002).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

VERSION = "0.0.0-standin"
METRICS = {"vllm": ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                    "vllm:prompt_tokens_total", "vllm:generation_tokens_total"),
           "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                      "sglang:prompt_tokens_total", "sglang:generation_tokens_total")}


def install(folder: Path) -> dict[str, str]:
    """A ``vllm`` program and an ``sglang`` package in ``folder`` that run this stand-in: {"bin": the folder for
    PATH, "packages": the one for PYTHONPATH}."""
    here = Path(__file__).resolve()
    bin_, packages = folder / "bin", folder / "packages" / "sglang"
    bin_.mkdir(parents=True)
    packages.mkdir(parents=True)
    program = bin_ / "vllm"
    program.write_text(f"#!/bin/sh\nexec {sys.executable} {here} vllm \"$@\"\n")
    program.chmod(0o755)
    (packages / "__init__.py").write_text("")
    (packages / "launch_server.py").write_text(
        f"import runpy, sys\nsys.argv = [{str(here)!r}, 'sglang', *sys.argv[1:]]\n"
        f"runpy.run_path({str(here)!r}, run_name='__main__')\n")
    return {"bin": str(bin_), "packages": str(packages.parent)}


class State:
    def __init__(self, kind: str, name: str) -> None:
        self.kind, self.name = kind, name
        self.lock = threading.Lock()
        self.running = self.generations = self.prompt_tokens = self.output_tokens = 0


def handler(state: State, token_s: float, die_after: int | None):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _json(self, body: dict, status: int = 200) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._json({})
            elif self.path == "/version" and state.kind == "vllm":
                self._json({"version": VERSION})
            elif self.path == "/get_server_info" and state.kind == "sglang":
                self._json({"version": VERSION, "model_path": state.name})
            elif self.path == "/v1/models":
                self._json({"object": "list", "data": [{"id": state.name, "object": "model"}]})
            elif self.path == "/metrics":
                running, waiting, cache, prompt, output = METRICS[state.kind]
                with state.lock:
                    text = (f"# TYPE {running} gauge\n{running}{{model_name=\"{state.name}\"}} {state.running}\n"
                            f"# TYPE {waiting} gauge\n{waiting}{{model_name=\"{state.name}\"}} 0\n"
                            f"# TYPE {cache} gauge\n{cache}{{model_name=\"{state.name}\"}} {0.01 * state.running}\n"
                            f"{prompt}{{model_name=\"{state.name}\"}} {state.prompt_tokens}\n"
                            f"{output}{{model_name=\"{state.name}\"}} {state.output_tokens}\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)
            else:
                self._json({"error": "not found"}, 404)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if self.path == "/tokenize":
                text = body.get("prompt") or body.get("content") or ""
                self._json({"tokens": [len(w) for w in text.split()], "words": text.split()})
            elif self.path == "/detokenize":
                self._json({"prompt": " ".join("w" * int(t) for t in body.get("tokens", []))})
            elif self.path in ("/v1/completions", "/v1/chat/completions"):
                self._generate(body)
            else:
                self._json({"error": "not found"}, 404)

        def _generate(self, body: dict) -> None:
            with state.lock:
                state.generations += 1
                if die_after is not None and state.generations >= die_after:
                    print(f"stand-in {state.kind}: dying at generation request {state.generations}", flush=True)
                    os._exit(3)
                state.running += 1
            prompt = body.get("prompt") or " ".join(m.get("content", "") for m in body.get("messages", []))
            n, prompt_n = int(body.get("max_tokens") or 16), len(str(prompt).split())
            chat = self.path.endswith("chat/completions")
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            with state.lock:   # as an engine counts them: the prompt when it is read, each token as it is made
                state.prompt_tokens += prompt_n
            try:
                for i in range(n):
                    time.sleep(token_s)
                    with state.lock:
                        state.output_tokens += 1
                    choice = {"index": 0, "delta": {"content": f" t{i}"}} if chat else {"index": 0, "text": f" t{i}"}
                    self.wfile.write(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
                    self.wfile.flush()
            finally:           # done before its last words are sent, as the engine's step ends before its answer
                with state.lock:
                    state.running -= 1
            usage = {"prompt_tokens": prompt_n, "completion_tokens": n, "total_tokens": prompt_n + n}
            self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode())
            self.wfile.flush()
            self.close_connection = True

    return Handler


def main(argv: list[str]) -> int:
    kind, rest = argv[0], argv[1:]
    p = argparse.ArgumentParser(prog=kind)
    if kind == "vllm":
        if rest[:1] == ["--version"]:
            print(VERSION)
            return 0
        p.add_argument("verb", choices=["serve"])
        p.add_argument("model")
        p.add_argument("--max-num-seqs", type=int)
        p.add_argument("--max-model-len", type=int)
    else:
        p.add_argument("--model-path", required=True)
        p.add_argument("--max-running-requests", type=int)
        p.add_argument("--context-length", type=int)
        p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--served-model-name")
    p.add_argument("--dtype", default="auto")
    args = p.parse_args(rest)
    model = args.model if kind == "vllm" else args.model_path
    if os.environ.get("STANDIN_EXIT_AT_START"):
        print(f"stand-in {kind}: cannot load {model}: out of memory (as told)", flush=True)
        return 1
    die_after = int(os.environ["STANDIN_DIE_AFTER"]) if os.environ.get("STANDIN_DIE_AFTER") else None
    state = State(kind, args.served_model_name or model)
    server = ThreadingHTTPServer((args.host, args.port),
                                 handler(state, float(os.environ.get("STANDIN_TOKEN_S") or 0.002), die_after))
    server.daemon_threads = True
    print(f"stand-in {kind} {VERSION} serving {model} as {state.name} on {args.host}:{args.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
