"""xpubench commands in child processes, each with its peak resident memory, for the tests that bound it.

``Children()`` starts one runner process that imports ``xpubench.cli`` once; ``run(argv, limit_s)`` has it fork
a child that runs ``xpubench argv`` (stdout and stderr to files) and waits for it with ``os.wait4``, whose
``ru_maxrss`` is that child's peak resident set (the imports it shares with the runner included, as a fresh
``xpubench`` process holds them too), or that of a process it started and waited for where larger (Linux
counts them: the CPU clock's measuring child, 206 MB, where the clock is not cached). A child still running
after ``limit_s`` is killed and said so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Self

RUNNER = r"""
import json, os, signal, sys, time
from xpubench.cli import main

for line in sys.stdin:
    argv, out, err, limit_s = json.loads(line)
    pid = os.fork()
    if pid == 0:
        for fd, path in ((1, out), (2, err)):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or 0)
    deadline, killed = time.monotonic() + limit_s, False
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline and not killed:
            os.kill(pid, signal.SIGKILL)
            killed = True
        time.sleep(0.02)
    print(json.dumps({"code": os.waitstatus_to_exitcode(status), "peak_mb": usage.ru_maxrss / 1024,
                      "killed": killed}), flush=True)
"""


@dataclass
class Ended:
    code: int
    peak_mb: float
    killed: bool        # still running at the limit
    seconds: float
    out: str
    err: str


class Children:
    """``with Children() as kids: kids.run(["serve", ...], limit_s=60)``."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.count = folder, 0
        self.proc = subprocess.Popen([sys.executable, "-c", RUNNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env={**os.environ, "COLUMNS": "100"})

    def run(self, argv: list[str], limit_s: float) -> Ended:
        self.count += 1
        out, err = self.folder / f"out-{self.count}.txt", self.folder / f"err-{self.count}.txt"
        began = time.monotonic()
        self.proc.stdin.write(json.dumps([argv, str(out), str(err), limit_s]) + "\n")
        self.proc.stdin.flush()
        said = json.loads(self.proc.stdout.readline())
        return Ended(said["code"], said["peak_mb"], said["killed"], time.monotonic() - began,
                     out.read_text(errors="replace"), err.read_text(errors="replace"))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)
