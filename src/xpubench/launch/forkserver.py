"""Worker processes forked from a server that has already imported the framework (asv's "forkserver").

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
import importlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

from xpubench import envnames
from xpubench.errors import UserError

PER_WORKER = (envnames.MEMORY_LIMIT, envnames.SCRATCH, envnames.SERVER, envnames.SERVER_HEADERS,   # not the
              "PYTEST_CURRENT_TEST")                                                                   # server's
MAX_SERVERS = 6   # idle servers kept (a torch one holds ~0.3 GB); the least recently used is closed beyond
IDLE_EXIT_S = 600.0   # a server with no worker for this long exits (a notebook's kernel does not hold it)


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


# ---- the runner's side ----------------------------------------------------------------------------

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
                [sys.executable, "-m", "xpubench.launch.forkserver", str(self.requests_r), str(self.replies_w),
                 *preload], env=env, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd,
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
        for other in _servers.values():   # ended (idle for IDLE_EXIT_S, killed) or broken: reaped, dropped
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


# ---- the server's side ----------------------------------------------------------------------------

def serve(requests_fd: int, replies_fd: int, preload: list[str]) -> None:
    """Import ``preload`` (one that fails is left for the worker to meet, where a spawned worker would),
    then fork a worker per request until the requests pipe closes or it has been idle IDLE_EXIT_S (the
    runner then starts another: start_worker drops a server that has ended)."""
    _name_process("xpubench-forks")
    for name in ["xpubench.launch.worker", "xpubench.launch.dispatch", *preload]:
        with contextlib.suppress(Exception):   # the child meets the same error at the same import
            importlib.import_module(name)
    watching = selectors.DefaultSelector()
    watching.register(requests_fd, selectors.EVENT_READ, None)
    buffer = b""
    while True:
        ready = watching.select(timeout=IDLE_EXIT_S)
        if not ready and len(watching.get_map()) == 1:
            return   # idle: only the requests pipe is watched, no worker
        for key, _ in ready:
            if key.data is None:
                chunk = os.read(requests_fd, 65536)
                if not chunk:
                    return   # the runner is gone
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    request, server = json.loads(line), os.getpid()
                    pid = os.fork()
                    if pid == 0:
                        _child(request, server, (requests_fd, replies_fd))
                    with contextlib.suppress(OSError):   # its own group before its pid is told (the child too)
                        os.setpgid(pid, pid)
                    watching.register(os.pidfd_open(pid), selectors.EVENT_READ, pid)
                    _answer(replies_fd, {"pid": pid})
            else:
                watching.unregister(key.fd)
                os.close(key.fd)
                _, status = os.waitpid(key.data, 0)
                _answer(replies_fd, {"exited": key.data, "code": os.waitstatus_to_exitcode(status)})


def _answer(fd: int, reply: dict) -> None:
    os.write(fd, json.dumps(reply).encode() + b"\n")


def _child(request: dict, server: int, server_fds: tuple[int, ...]) -> None:
    """The worker: its own process group, its output in its log, the runner's environment and folder,
    then worker.main; never returns into the server's loop."""
    code = 1
    try:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)   # a timeout kills the worker and its children (the server's session has no terminal)
        for fd in server_fds:
            os.close(fd)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        for fd, target in ((null, 0), (log, 1), (log, 2)):
            os.dup2(fd, target)
        os.close(null)
        os.close(log)
        os.environ.clear()
        os.environ.update(request["env"], **{envnames.PARENT_PID: str(server)})   # the server is its parent
        if request.get("cwd"):
            with contextlib.suppress(OSError):
                os.chdir(request["cwd"])
                sys.path[0] = request["cwd"]   # as ``python -m`` started there would have it
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _name_process("xpubench-worker")
        from xpubench.launch import worker

        sys.argv = [worker.__file__, *request["argv"]]
        code = worker.main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:   # noqa: BLE001 - printed to the worker's log, which the runner reads
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()   # what its imports registered, as at a spawned worker's exit
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _name_process(name: str) -> None:
    """What ps and top show as the process's name (its command line stays the server's)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/comm").write_text(name)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
