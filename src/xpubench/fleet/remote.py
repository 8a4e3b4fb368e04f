"""The fleet's helper on the other side: ``python -m xpubench.fleet.remote`` (ssh: its request on stdin, kept
open while the run goes on; closing it cancels the run) or ``... --request FILE`` (a pod, a SkyPilot task).

It refuses a request of another xpubench version, writes the plan it was sent (the fleet file; on a resume
also the results and plan so far) into a fresh folder, runs ``xpubench run`` there and sends back, as
fleet/stream.py's messages on stdout, the plan sidecar and every results line the moment the run appends it,
then the run's exit code. The run's own output goes to stderr (the ssh session's log, the pod's log)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from xpubench.envnames import FLEET_MACHINE
from xpubench.fleet.folder import plan_of, run_args
from xpubench.fleet.stream import message
from xpubench.version import __version__

POLL_S = 0.5
STOP_WAIT_S = 60


def send(**fields) -> None:
    sys.stdout.write(message(**fields))
    sys.stdout.flush()


class Follower:
    """Sends what the run appends to ``results``: complete lines only, from ``offset`` on."""

    def __init__(self, results: Path, offset: int):
        self.results, self.offset, self.plan_sent = results, offset, False

    def step(self) -> None:
        plan = plan_of(self.results)
        if not self.plan_sent and plan.exists():
            send(plan=plan.read_text(encoding="utf-8", errors="surrogateescape"))
            self.plan_sent = True
        try:
            with open(self.results, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        for line in data[:end].splitlines():
            send(line=line.decode("utf-8", "surrogateescape"))
        self.offset += end


def _cancelled_when_stdin_closes() -> threading.Event:
    closed = threading.Event()

    def watch() -> None:
        while sys.stdin.buffer.read1(65536):
            pass
        closed.set()

    threading.Thread(target=watch, daemon=True).start()
    return closed


def serve(request: dict, cancel: threading.Event | None) -> int:
    if request.get("version") != __version__:
        send(error=f"xpubench {__version__} on {socket.gethostname()}, the fleet's is {request.get('version')}: "
                   "install the same version on both (docs/fleet.md)")
        return 2
    workdir = request.get("workdir")
    folder = Path(tempfile.mkdtemp(prefix="xpubench-fleet-", dir=os.path.expanduser(workdir) if workdir else None))
    try:
        results, config = folder / f"{request['name']}.jsonl", folder / "fleet.toml"
        config.write_text(request["config"], encoding="utf-8")
        resume = "results" in request
        if resume:
            results.write_bytes(request["results"].encode("utf-8", "surrogateescape"))
            plan_of(results).write_text(request["plan"], encoding="utf-8")
        follower = Follower(results, results.stat().st_size if resume else 0)
        argv = [sys.executable, *run_args(request["run_module"], results, config, resume, int(request.get("tasks", 1)))]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr,
                                cwd=os.path.expanduser(workdir) if workdir else None,
                                env={**os.environ, FLEET_MACHINE: json.dumps(request.get("machine", {}))})
        while proc.poll() is None:
            follower.step()
            if cancel is not None and cancel.wait(POLL_S):
                proc.send_signal(signal.SIGTERM)   # the run unwinds like Ctrl-C: finished cases stay
                try:
                    proc.wait(STOP_WAIT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
            elif cancel is None:
                time.sleep(POLL_S)
        follower.step()
        send(exit=proc.wait())
        return 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xpubench.fleet.remote")
    parser.add_argument("--request", help="the request's file (default: its first line on stdin, which stays "
                        "open while the run goes on)")
    args = parser.parse_args(argv)
    send(hello=__version__)
    if args.request:
        request, cancel = json.loads(Path(args.request).read_text(encoding="utf-8")), None
    else:
        request, cancel = json.loads(sys.stdin.buffer.readline()), _cancelled_when_stdin_closes()
    return serve(request, cancel)


if __name__ == "__main__":
    sys.exit(main())
