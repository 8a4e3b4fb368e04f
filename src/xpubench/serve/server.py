"""The server under load: an engine's OpenAI-compatible server started by xpubench (``--server llamacpp``,
``vllm``, ``sglang``: the engine record's ``ServerSpec``, backends/serverspec.py), or any such server at a URL; either
way what the server says about itself is recorded.

``Server`` starts the spec's command on 127.0.0.1 at a free port, serving the model under the case's name,
with the slots (requests at once) and context the plan gave (plan/serve.py), on the case's device (an
accelerator's index in the spec's ``device_variable``); it waits for the spec's health route to answer 200
(the model loaded); and on exit -- Ctrl-C, SIGTERM and SIGHUP included (errors.stops_like_ctrl_c) --
terminates it (SIGTERM, then SIGKILL after 10 s); were xpubench killed outright, the kernel ends it
(errors.ends_with_parent). Its log goes to a temporary file whose last lines are the error when it dies, at
its start (``UserError``) or later (``gone``). ``provenance(url)`` reads ``/v1/models``, ``/props``
(llama.cpp), ``/version`` (vLLM), ``/get_server_info`` (SGLang) and the ``Server`` header.
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
# what a server says about itself: (route, the description's key)
PATHS = (("v1/models", "models"), ("props", "props"), ("version", "version"), ("get_server_info", "server_info"))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``with Server(spec, model, name=..., slots=4, context=...) as server:`` -> ``server.url`` serves it."""

    def __init__(self, spec, model: str, *, name: str, slots: int, context: int, fmt: str,
                 threads: int | None = None, device_index: str | None = None,
                 health_timeout_s: float = HEALTH_TIMEOUT_S) -> None:
        self.spec, self.health_timeout_s = spec, health_timeout_s
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = spec.argv(model=model, host="127.0.0.1", port=self.port, name=name, slots=slots,
                                 context=context, total_context=slots * context, format=fmt, threads=threads)
        placed = {spec.device_variable: device_index} if spec.device_variable and device_index is not None else {}
        self.environment = {**os.environ, **placed}
        self.proc: subprocess.Popen | None = None
        self.log = None

    @property
    def command_line(self) -> str:
        """The command as it is shown and recorded (a key among its arguments redacted)."""
        return redacted(shlex.join(self.command))

    def version(self) -> str:
        """What it says its version is: its version route's ``version`` (vLLM, SGLang), or the "version:" line
        of its program's version flag (llama-server: "0.5.0-dev (build 1, commit 0c1e570)"); else "unknown"."""
        if self.spec.version_route:
            said = asyncio.run(_get(f"{self.url}{self.spec.version_route}"))
            value = said.value.get("version") if isinstance(said.value, dict) else None
            return str(value)[:bounded.TEXT] if value else "unknown"
        try:
            out = subprocess.run([*self.spec.program, *self.spec.version_args], capture_output=True, text=True,
                                 timeout=30, check=False)
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
        self.log = tempfile.NamedTemporaryFile("w+", prefix="xpubench-server-", suffix=".log", delete=False)
        try:
            # its own session: a terminal's Ctrl-C reaches xpubench alone, which records the cut point, then
            # stops the server (stop); it ends with xpubench even when xpubench is killed outright, and a
            # stop sent as it starts arrives once it is self.proc (errors.stops_held). ends_with_parent
            # takes no lock and imports nothing (prctl was looked up before): safe between fork and exec
            with stops_held(), warnings.catch_warnings():
                # JAX, where this process imported it, warns of any fork: this child runs no JAX, only exec
                warnings.filterwarnings("ignore", r"os\.fork\(\) was called", RuntimeWarning)
                try:
                    self.proc = subprocess.Popen(self.command, stdout=self.log, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL, env=self.environment,
                                                 start_new_session=True, preexec_fn=ends_with_parent)  # noqa: PLW1509
                except OSError as exc:
                    raise UserError(f"{self.spec.title} did not start: {exc.strerror or exc} "
                                    f"({self.command[0]})") from None
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.health_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise UserError(f"{self.spec.title} exited with status {self.proc.returncode} before it was ready: "
                                f"{self.log_tail() or 'it wrote nothing'}")
            try:
                if httpx.get(f"{self.url}{self.spec.health}", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise UserError(f"{self.spec.title} was not ready after {self.health_timeout_s:g} s: {self.log_tail()}")

    def gone(self) -> str | None:
        """Why the server is no longer there (it exited: its status and its log's last lines), or None."""
        if self.proc is None or self.proc.poll() is None:
            return None
        return (f"{self.spec.title} exited with status {self.proc.returncode} during the sweep: "
                f"{self.log_tail() or 'it wrote nothing'}")

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


async def _get(url: str, timeout_s: float = 30.0) -> bounded.Answer:
    async with httpx.AsyncClient(timeout=timeout_s) as client:
        return await bounded.call(client, "GET", url, deadline_s=timeout_s)


def provenance(url: str, timeout_s: float = 30.0,
               headers: dict[str, str] | None = None) -> tuple[dict[str, Any], str | None]:
    """(what the server at ``url`` says about itself, its first model's id whole, for the requests): its
    models, properties, version and Server header, asked together within ``timeout_s`` and kept within
    serve/bounded.py's bounds (``cut`` says what was cut; ``headers``: the credentials). One line (UserError)
    when none is answered."""
    return asyncio.run(_provenance(url, timeout_s, headers or {}))


async def _provenance(url: str, timeout_s: float, headers: dict[str, str]) -> tuple[dict[str, Any], str | None]:
    async with httpx.AsyncClient(timeout=timeout_s, headers=headers) as client:
        answers = await asyncio.gather(*(bounded.call(client, "GET", f"{url}/{path}", deadline_s=timeout_s)
                                         for path, _ in PATHS))
    models, props, version, server_info = answers
    if all(a.status is None for a in answers):
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
        told["props"] = {k: p.get(k) for k in ("total_slots", "model_path", "model_ftype", "build_info")
                         if p.get(k) is not None}
        told["props"]["n_ctx"] = settings.get("n_ctx") if isinstance(settings, dict) else None
    if isinstance(version.value, dict):
        told["version"] = version.value.get("version")
    if isinstance(server_info.value, dict):
        told["server_info"] = {k: server_info.value.get(k) for k in ("version", "model_path", "dtype")
                               if server_info.value.get(k) is not None}
    told["server_header"] = models.headers.get("server")
    unread = [f"/{path}: {a.error}" for (path, _), a in zip(PATHS, answers) if a.error and a.status]
    if unread:
        told["unread"] = "; ".join(unread)
    cut: list[str] = []
    info = {"url": url, **bounded.shaped(told, cut)}
    if cut:
        info["cut"] = "; ".join(cut[:4]) + (f"; and {len(cut) - 4} more" if len(cut) > 4 else "")
    return info, (ids[0] if ids else None)


def server_name(info: dict[str, Any]) -> str:
    """"llama.cpp b1-0c1e570", "SGLang 0.4.6", "vLLM 0.9.1", or the Server header, or "unknown"."""
    props, server_info = info.get("props") or {}, info.get("server_info") or {}
    if props.get("build_info"):
        return f"llama.cpp {props['build_info']}"
    if server_info.get("version"):
        return f"SGLang {server_info['version']}"
    if info.get("version"):
        return f"{info.get('server_header') or 'server'} {info['version']}"
    return info.get("server_header") or "unknown"
