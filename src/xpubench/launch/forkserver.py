"""Worker processes forked from a server that has already imported the framework (asv's "forkserver"):
the runner's side, which starts the servers, asks them for workers and waits on those (the server process
itself: launch/forkserver_process.py).

A fresh ``python -m xpubench.launch.worker`` pays the interpreter's start and the framework's import in
every process (measured on the project's 2-core VM: torch + its compiler ~5 CPU s, jax + flax + optax
~2.5 s) -- more than many cases' measured work. A fork server is one process per (environment, backend)
that imports those modules once, untimed, and then forks one child per worker; the child is still one
fresh process per case (its own pid, process group and address space; nothing of an earlier case), it
only finds the imports done. What a case measures starts after set-up in the worker either way
(docs/methodology.md; a spawned worker imports the same ``preload`` before its case, untimed, so the
first step or the memory peak does not depend on the method); the method is recorded in each run's
metrics as ``launch``.

Where it applies (``method``): a CPU case on Linux (fork + ``os.pidfd_open``) unless XPUBENCH_LAUNCH=spawn;
an accelerator case spawns unless XPUBENCH_LAUNCH=forkserver (no accelerator here has run it). A
server's environment is the worker's, made before its imports as the worker makes it, so what the
frameworks read at import is what a spawned worker would read; its key is that whole environment
(less what differs per worker or per test, ``PER_WORKER``), so another environment gets another server.

Protocol (JSON lines on two pipes): the runner writes ``{"argv", "env", "log", "cwd"}``; the server forks, answers
``{"pid"}``, and when the child ends ``{"exited", "code"}`` (``Popen.returncode``'s convention: -N for
signal N). One case at a time per server; a runner that needs two at once gets two servers. When the
runner goes away its requests pipe closes and the server exits; its children then see their parent
change and end themselves (worker.watch_parent), as a spawned worker does when the runner dies.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import selectors
import subprocess
import sys
import tempfile
import threading
import time

from xpubench import envnames
from xpubench.errors import UserError

PER_WORKER = (envnames.MEMORY_LIMIT, envnames.SCRATCH, envnames.SERVER, envnames.SERVER_HEADERS,   # not the
              "PYTEST_CURRENT_TEST")                                                                   # server's
MAX_SERVERS = 6   # idle servers kept (a torch one holds ~0.3 GB); the least recently used is closed beyond


def method(device_is_accelerator: bool, environ=os.environ) -> str:
    """"forkserver" or "spawn" for a case (module docstring)."""
    asked = environ.get(envnames.LAUNCH, "").strip().lower()
    if asked not in ("", "spawn", "forkserver"):
        raise UserError(f"{envnames.LAUNCH}={environ[envnames.LAUNCH]!r}: use spawn or forkserver (or leave it unset)")
    if asked == "forkserver" and not _can_fork_serve():
        raise UserError(f"{envnames.LAUNCH}=forkserver needs Linux 5.3 or later (pidfds): use spawn here")
    if asked == "spawn" or not _can_fork_serve():
        return "spawn"
    return "forkserver" if asked == "forkserver" or not device_is_accelerator else "spawn"


@functools.cache
def _can_fork_serve() -> bool:
    """Linux with pidfds (5.3+): a server waits for its children and the runner's requests in one loop."""
    if not sys.platform.startswith("linux") or not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


class ServerGone(RuntimeError):
    """The fork server ended while it held a worker (the worker ends itself: worker.watch_parent)."""


class Forked:
    """A worker forked by a server, waited on like a ``subprocess.Popen``."""

    def __init__(self, server: ForkServer, pid: int):
        self.server, self.pid, self.returncode = server, pid, None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.server.wait_exit(self.pid, timeout)
            self.server.release()
        return self.returncode


class ForkServer:
    """One server process: ``start`` a worker, ``wait_exit`` for it."""

    def __init__(self, env: dict[str, str], preload: tuple[str, ...]):
        self.requests_r, self.requests_w = os.pipe()
        self.replies_r, self.replies_w = os.pipe()
        log_fd, self.log = tempfile.mkstemp(prefix="xpubench-forkserver-", suffix=".txt")   # its own output
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "xpubench.launch.forkserver_process", str(self.requests_r),
                 str(self.replies_w), *preload], env=env, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd,
                pass_fds=(self.requests_r, self.replies_w), start_new_session=True)   # Ctrl-C is the runner's
        except OSError as exc:
            for fd in (self.requests_w, self.replies_r):
                os.close(fd)
            raise ServerGone(f"the fork server did not start ({exc})") from None
        finally:
            for fd in (self.requests_r, self.replies_w, log_fd):
                os.close(fd)
        self.replies = selectors.DefaultSelector()
        self.replies.register(self.replies_r, selectors.EVENT_READ)
        self.buffer, self.busy, self.broken, self.used = b"", False, False, time.monotonic()

    def start(self, argv: list[str], env: dict[str, str], log_path: str, timeout: float | None) -> Forked:
        """The worker forked (the server's imports, on its first request, count in ``timeout`` as a spawned
        worker's do; past it, or interrupted, the server is ended: TimeoutExpired, or the interruption)."""
        cwd = None
        with contextlib.suppress(OSError):
            cwd = os.getcwd()
        request = json.dumps({"argv": argv, "env": env, "log": log_path, "cwd": cwd}).encode() + b"\n"
        try:
            os.write(self.requests_w, request)
            reply = self._reply(timeout)
        except TimeoutError:   # _reply's: the imports outlast the timeout
            self._end()
            raise subprocess.TimeoutExpired("the fork server's imports", timeout) from None
        except (OSError, ServerGone) as exc:
            self.broken = True
            raise ServerGone(f"the fork server did not start the worker ({exc}){self._log_tail()}") from None
        except BaseException:   # Ctrl-C while it imports: it must not fork the case afterwards
            self._end()
            raise
        return Forked(self, reply["pid"])

    def wait_exit(self, pid: int, timeout: float | None) -> int:
        try:
            reply = self._reply(timeout)
        except TimeoutError:
            raise subprocess.TimeoutExpired(f"worker {pid}", timeout) from None
        except ServerGone:
            self.broken = True
            raise
        return int(reply["code"])

    def _reply(self, timeout: float | None) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self.replies.select(left):
                raise TimeoutError(f"no answer within {timeout:g} s")
            chunk = os.read(self.replies_r, 65536)
            if not chunk:
                raise ServerGone(f"the fork server ended (exit code {self.proc.poll()}){self._log_tail()}")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def _log_tail(self) -> str:
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                tail = f.read()[-400:].strip()
        except OSError:
            return ""
        return f": {tail}" if tail else ""

    def _end(self) -> None:
        self.broken = True
        self.proc.kill()
        self.proc.wait()

    def release(self) -> None:
        self.busy, self.used = False, time.monotonic()

    def hang_up(self) -> None:
        """Its requests pipe closed: the server exits (its running worker, if any, then ends itself)."""
        self.replies.close()
        for fd in (self.requests_w, self.replies_r):
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        self.hang_up()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        with contextlib.suppress(OSError):
            os.unlink(self.log)


_servers: dict[tuple, list[ForkServer]] = {}
_lock = threading.Lock()


def start_worker(argv: list[str], env: dict[str, str], server_env: dict[str, str], preload: tuple[str, ...],
                 log_path: str, timeout: float | None = None, process: int = 0) -> Forked:
    """``argv`` (worker.main's arguments) run in a child of an idle server for ``server_env``, ``preload``
    and the case's worker process ``process`` (started if there is none: each of a case's K processes
    forks from a server of its own, so they differ in memory layout and hash seed as spawned ones do,
    and the spread between them stays what it measures); ``env`` is the child's whole environment.
    ServerGone where the server can't start it; TimeoutExpired where its imports outlast ``timeout``."""
    own = {k: v for k, v in server_env.items() if k not in PER_WORKER}   # the server's environment
    key = (tuple(sorted(own.items())), preload, process)
    with _lock:
        for other in _servers.values():   # ended (idle: forkserver_process.py; killed) or broken: reaped, dropped
            for dead in [s for s in other if s.broken or s.proc.poll() is not None]:
                other.remove(dead)
                dead.close()
        pool = _servers.setdefault(key, [])
        server = next((s for s in pool if not s.busy), None)
        if server is None:
            server = ForkServer(own, preload)
            pool.append(server)
            _close_beyond(MAX_SERVERS)
        server.busy = True
    try:
        return server.start(argv, env, log_path, timeout)
    except (ServerGone, subprocess.TimeoutExpired):
        server.release()
        raise


def _forget_after_fork() -> None:
    """A process forked from a runner holding servers starts with none (the pipes are the parent's)."""
    for pool in _servers.values():
        for server in pool:
            for fd in (server.requests_w, server.replies_r):
                with contextlib.suppress(OSError):
                    os.close(fd)
    _servers.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _close_beyond(limit: int) -> None:
    idle = sorted((s for pool in _servers.values() for s in pool if not s.busy), key=lambda s: s.used)
    for server in idle[:max(0, len(idle) - limit)]:
        for pool in _servers.values():
            if server in pool:
                pool.remove(server)
        server.close()


@atexit.register
def close_all() -> None:
    """Every server ends (their requests pipes close, then each is waited for), e.g. at the runner's exit."""
    with _lock:
        servers = [server for pool in _servers.values() for server in pool]
        _servers.clear()
    for server in servers:
        server.hang_up()
    for server in servers:
        server.close()
