"""The server under load: llama.cpp's ``llama-server`` started by xpubench (``--server llamacpp``), or any
OpenAI-compatible server at a URL; either way what the server says about itself is recorded.

``LlamaServer`` starts the cached build's ``llama-server`` (backends/llamacpp_/binaries.py finds it beside
llama-bench) on 127.0.0.1 at a free port with ``-np`` parallel slots (one per user of the largest
concurrency, continuous batching on, llama.cpp's default), a context of ``slots x per-slot`` tokens and
this process's usable cores as threads; it waits for ``/health`` to say ok (the model loaded), and on
exit -- Ctrl-C, SIGTERM and SIGHUP included (errors.stops_like_ctrl_c) -- terminates it (SIGTERM, then
SIGKILL after 10 s); were xpubench killed outright, the kernel ends it (errors.ends_with_parent). Its log
goes to a temporary file whose last lines are the error when it dies. ``provenance(url)`` reads
``/v1/models``, ``/props`` (llama.cpp), ``/version`` (vLLM) and the ``Server`` header.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import socket
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import httpx

from xpubench.errors import UserError, ends_with_parent, stops_held
from xpubench.results.redact import redacted
from xpubench.serve import bounded

HEALTH_TIMEOUT_S = 300.0
PATHS = ("v1/models", "props", "version")   # what a server says about itself


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_program() -> tuple[Path, dict[str, Any]]:
    """(llama-server, the build's record) of the llama.cpp build xpubench uses; one line when there is none."""
    from xpubench.backends.llamacpp_.binaries import SERVER, find

    programs = find()
    if programs.bench is None:
        raise UserError(f"--server llamacpp: {programs.missing}")
    program = programs.bench.parent / SERVER
    if not program.is_file():
        raise UserError(f"--server llamacpp: no {SERVER} beside {programs.bench} (scripts/build_llamacpp.sh builds it)")
    return program, programs.build


class LlamaServer:
    """``with LlamaServer(gguf, slots=4, context=...) as server:`` -> ``server.url`` serves it."""

    def __init__(self, model: Path, *, slots: int, slot_context: int, threads: int | None = None,
                 extra: list[str] | None = None, program: Path | None = None) -> None:
        self.program, self.build = (program, {}) if program else server_program()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        threads = threads or len(os.sched_getaffinity(0))
        self.command = [str(self.program), "-m", str(model), "--host", "127.0.0.1", "--port", str(self.port),
                        "-np", str(slots), "-c", str(slots * slot_context), "-t", str(threads), "--no-webui",
                        *(extra or [])]
        self.proc: subprocess.Popen | None = None
        self.log = None

    @property
    def command_line(self) -> str:
        """The command as it is shown and recorded: a key among ``extra`` (``--api-key K``) redacted."""
        return redacted(shlex.join(self.command))

    def version(self) -> str:
        """``llama-server --version``'s version line, e.g. "0.5.0-dev (build 1, commit 0c1e570)"."""
        try:
            out = subprocess.run([str(self.program), "--version"], capture_output=True, text=True, timeout=30,
                                 check=False)
        except (OSError, subprocess.SubprocessError):
            return "unknown"
        line = next((ln for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("version:")), "")
        return line.partition(":")[2].strip() or "unknown"

    def log_tail(self, lines: int = 3) -> str:
        if self.log is None:
            return ""
        self.log.flush()
        text = Path(self.log.name).read_text(errors="replace").strip().splitlines()
        keep = [ln for ln in text if not ln.startswith("#")]   # a crash's gdb backtrace is not the reason
        return " | ".join(keep[-lines:])

    def __enter__(self):
        self.log = tempfile.NamedTemporaryFile("w+", prefix="xpubench-llama-server-", suffix=".log", delete=False)
        try:
            # its own session: a terminal's Ctrl-C reaches xpubench alone, which records the cut point, then
            # stops the server (stop); it ends with xpubench even when xpubench is killed outright, and a
            # stop sent as it starts arrives once it is self.proc (errors.stops_held). ends_with_parent
            # takes no lock and imports nothing (prctl was looked up before): safe between fork and exec
            with stops_held(), warnings.catch_warnings():
                # JAX, where this process imported it, warns of any fork: this child runs no JAX, only exec
                warnings.filterwarnings("ignore", r"os\.fork\(\) was called", RuntimeWarning)
                self.proc = subprocess.Popen(self.command, stdout=self.log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True,
                                             preexec_fn=ends_with_parent)  # noqa: PLW1509
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise UserError(f"llama-server exited with status {self.proc.returncode} before it was ready: "
                                f"{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise UserError(f"llama-server was not ready after {HEALTH_TIMEOUT_S:g} s: {self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM, SIGKILL after 10 s, its log removed, whole: a stop meanwhile waits for it (errors.stops_held)."""
        with stops_held():
            if self.proc is not None and self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            if self.log is not None:
                self.log.close()
                Path(self.log.name).unlink(missing_ok=True)
                self.log = None

    def __exit__(self, *exc) -> None:
        self.stop()


def provenance(url: str, timeout_s: float = 30.0,
               headers: dict[str, str] | None = None) -> tuple[dict[str, Any], str | None]:
    """(what the server at ``url`` says about itself, its first model's id whole, for the requests): its
    models, properties, version and Server header, asked together within ``timeout_s`` and kept within
    serve/bounded.py's bounds (``cut`` says what was cut; ``headers``: the credentials). One line (UserError)
    when none is answered."""
    return asyncio.run(_provenance(url, timeout_s, headers or {}))


async def _provenance(url: str, timeout_s: float, headers: dict[str, str]) -> tuple[dict[str, Any], str | None]:
    async with httpx.AsyncClient(timeout=timeout_s, headers=headers) as client:
        models, props, version = await asyncio.gather(*(bounded.call(client, "GET", f"{url}/{path}",
                                                                     deadline_s=timeout_s) for path in PATHS))
    if models.status is None and props.status is None and version.status is None:
        raise UserError(f"--url {url}: cannot reach the server ({models.error})")
    data = models.value.get("data") if isinstance(models.value, dict) else None
    entries = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    ids = [m["id"] for m in entries if isinstance(m.get("id"), str)]
    told: dict[str, Any] = {"models": ids}
    meta = next((m["meta"] for m in entries if isinstance(m.get("meta"), dict)), None)
    if meta:
        told["model_meta"] = meta
    if isinstance(props.value, dict):
        p, settings = props.value, props.value.get("default_generation_settings")
        told["props"] = {k: p.get(k) for k in ("total_slots", "model_path", "build_info") if p.get(k) is not None}
        told["props"]["n_ctx"] = settings.get("n_ctx") if isinstance(settings, dict) else None
    if isinstance(version.value, dict):
        told["version"] = version.value.get("version")
    told["server_header"] = models.headers.get("server")
    unread = [f"/{path}: {a.error}" for path, a in zip(PATHS, (models, props, version)) if a.error and a.status]
    if unread:
        told["unread"] = "; ".join(unread)
    cut: list[str] = []
    info = {"url": url, **bounded.shaped(told, cut)}
    if cut:
        info["cut"] = "; ".join(cut[:4]) + (f"; and {len(cut) - 4} more" if len(cut) > 4 else "")
    return info, (ids[0] if ids else None)


def server_name(info: dict[str, Any]) -> str:
    """"llama.cpp b1-0c1e570", "vLLM 0.9.1", or the Server header, or "unknown"."""
    props = info.get("props") or {}
    if props.get("build_info"):
        return f"llama.cpp {props['build_info']}"
    if info.get("version"):
        return f"{info.get('server_header') or 'server'} {info['version']}"
    return info.get("server_header") or "unknown"
