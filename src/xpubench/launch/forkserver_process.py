"""The fork server process itself (launch/forkserver.py starts it, one per environment, preload and worker
process, as ``python -m xpubench.launch.forkserver_process REQUESTS_FD REPLIES_FD PRELOAD...``): it imports
``preload`` once, untimed, then forks one worker per request and answers the runner on its replies pipe with the
worker's pid and, when the worker ends, its exit code (the protocol: launch/forkserver.py). The child
becomes the worker (its own process group, log, environment and folder, then worker.main). The server exits
when its requests pipe closes (the runner is gone) or after ``IDLE_EXIT_S`` with no worker.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import selectors
import signal
import sys
import traceback
from pathlib import Path

from xpubench import envnames

IDLE_EXIT_S = 600.0   # a server with no worker for this long exits (a notebook's kernel does not hold it)


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
