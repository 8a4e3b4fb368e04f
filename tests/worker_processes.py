"""A case's worker processes as a test finds them in /proc (Linux): a spawned worker's command line runs
``xpubench.launch.worker``; a worker forked by a fork server (launch/forkserver.py) keeps the server's
command line and is named ``xpubench-worker`` (its /proc/PID/comm), the server ``xpubench-forks``."""

from __future__ import annotations

import os

WORKER_MODULE = b"xpubench.launch.worker"
WORKER_NAME, SERVER_NAME = "xpubench-worker", "xpubench-forks"


def process_table() -> dict[int, tuple[int, str, bytes, str]]:
    """pid -> (parent pid, state, command line, name) of every process."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                cmdline = fh.read()
            with open(f"/proc/{entry.name}/comm") as fh:
                name = fh.read().strip()
        except OSError:
            continue
        table[int(entry.name)] = (int(fields[1]), fields[0], cmdline, name)
    return table


def descendants(pid: int, table=None) -> dict[int, tuple[bytes, str]]:
    """pid -> (command line, name) of every process below ``pid``."""
    table, found, todo = table or process_table(), {}, [pid]
    while todo:
        parent = todo.pop()
        for child, (ppid, _, cmdline, name) in table.items():
            if ppid == parent and child not in found:
                found[child] = (cmdline, name)
                todo.append(child)
    return found


def is_worker(cmdline: bytes, name: str) -> bool:
    return name == WORKER_NAME or (WORKER_MODULE in cmdline and name != SERVER_NAME)


def workers_below(pid: int) -> list[int]:
    """The worker processes below ``pid`` (spawned or forked)."""
    return [p for p, (cmdline, name) in descendants(pid).items() if is_worker(cmdline, name)]


def servers_below(pid: int) -> list[int]:
    """The fork servers below ``pid`` (they outlive a case: the next one forks from them)."""
    return [p for p, (_, name) in descendants(pid).items() if name == SERVER_NAME]
