"""Process 0's word to the other processes of a run (launchers/hosts.py): one TCP connection from each to
process 0, one JSON line per message. JSON only, never pickle: whatever connects can make nothing run.

    another process -> 0   {"process": I, "host": its host name}                            on joining
    0 -> another process   {"case": ..., "process": K, "timeout_s": ..., "memory_limit_bytes": ...}
                                                                                             per worker
    0 -> another process   {"end": true, "code": exit code, "error": a line or null}        last
"""

from __future__ import annotations

import json
import socket
import time

from xpubench.errors import UserError

JOIN_TIMEOUT_S = 300.0   # how long process 0 waits for the others to join, and they for it (as the frameworks)
RETRY_S = 0.2            # another process tries process 0 again after this long
HELLO_TIMEOUT_S = 10.0   # a connection that says nothing for this long is not one of the run's


class Lead:
    """Process 0's side: listens at ``port`` (every address) for the ``others`` processes."""

    def __init__(self, port: int, others: int) -> None:
        try:
            self.server = socket.create_server(("", port))
        except OSError as exc:
            raise UserError(f"process 0 cannot listen at port {port} for the run's other processes "
                            f"({exc.strerror or exc}): choose another --coordinator port (it uses PORT and "
                            "PORT+1)") from None
        self.port, self.others = port, others
        self.peers: dict[int, socket.socket] = {}
        self.hosts = {socket.gethostname()}

    def accept(self, timeout_s: float) -> None:
        """Until every other process joined; ConnectionError naming the missing ones after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while len(self.peers) < self.others:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(set(range(1, self.others + 1)) - set(self.peers))
                raise ConnectionError(f"process(es) {', '.join(map(str, missing))} did not join the run at port "
                                      f"{self.port} within {timeout_s:g} s: start every process with the same "
                                      "--coordinator (or under one srun)")
            self.server.settimeout(left)
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            self._greet(conn)

    def _greet(self, conn: socket.socket) -> None:
        conn.settimeout(HELLO_TIMEOUT_S)
        try:
            hello = json.loads(conn.makefile("rb").readline())
            process, host = hello["process"], str(hello["host"])
        except (OSError, ValueError, KeyError, TypeError):   # not one of the run's processes
            conn.close()
            return
        if isinstance(process, bool) or not isinstance(process, int) or not 0 < process <= self.others \
                or process in self.peers:
            conn.close()
            raise UserError(f"a process joined the run as process {process!r}: the others are 1..{self.others}, "
                            "each once (give each host its own --process-id)")
        conn.settimeout(None)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        self.peers[process] = conn
        self.hosts.add(host)

    def send(self, message: dict) -> None:
        line = (json.dumps(message) + "\n").encode()
        for process, conn in sorted(self.peers.items()):
            try:
                conn.sendall(line)
            except OSError as exc:
                raise ConnectionError(f"process {process} left the run ({exc.strerror or exc}): stopping; what "
                                      "ran is in the results file") from None

    def close(self) -> None:
        for conn in self.peers.values():
            conn.close()
        self.server.close()


def join(host: str, port: int, process: int, timeout_s: float = JOIN_TIMEOUT_S):
    """Another process's side: connected to process 0 (tried until ``timeout_s``), joined as ``process``;
    returns the connection's reading file."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn = socket.create_connection((host, port), timeout=max(RETRY_S, min(5.0, deadline - time.monotonic())))
            break
        except OSError:
            if time.monotonic() > deadline:
                raise ConnectionError(f"process 0 did not open the run at {host}:{port} within {timeout_s:g} s (is "
                                      "it running, with the same --coordinator? did it stop on an error?)") from None
            time.sleep(RETRY_S)
    conn.settimeout(None)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    conn.sendall((json.dumps({"process": process, "host": socket.gethostname()}) + "\n").encode())
    return conn.makefile("rb")


def heard(reading) -> dict | None:
    """Process 0's next message, or None where its connection closed without one."""
    line = reading.readline()
    return json.loads(line) if line.strip() else None
