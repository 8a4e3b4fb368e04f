"""The ``hosts`` launcher: several ``xpubench run`` processes started by hand, one per host, each told where
process 0 is, how many there are and which one it is (``--coordinator HOST:PORT --num-processes P
--process-id I``, or XPUBENCH_COORDINATOR / XPUBENCH_NUM_PROCESSES / XPUBENCH_PROCESS_ID). The base of the
``srun`` launcher, whose processes Slurm starts and numbers (launchers/slurm.py).

Process 0 listens at PORT + 1 (launchers/channel.py; PORT itself is each case's framework rendezvous:
``jax.distributed``'s coordinator, torch's c10d store). Before starting each worker it tells the others,
which start the same worker: one group per case, the cases in process 0's order, as far as its budget,
its OOMs and failures let them run. The others plan nothing and write nothing (launch/follower.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

from xpubench.backends.world import World
from xpubench.errors import UserError
from xpubench.launch.launchers import channel
from xpubench.launch.launchers.base import Launcher

END_GRACE_S = 2.0   # a run that stops on an error tells the processes that join within this long


class Hosts(Launcher):
    """Several processes, process 0 leading (the module docstring)."""

    name = "hosts"

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.lead: channel.Lead | None = None
        self.joined = False

    def _port(self) -> tuple[str, int]:
        host, port = self.world.host_port()
        return host, port + 1

    def open(self) -> None:
        if self.leads and self.lead is None:
            self.lead = channel.Lead(self._port()[1], self.world.num_processes - 1)

    def _join(self, timeout_s: float) -> None:
        """Process 0: every other process joined (within ``timeout_s``)."""
        self.open()
        self.lead.accept(timeout_s)
        if not self.joined:   # the machines are known: every worker records them (backends/world.py)
            self.joined = True
            self.world = dataclasses.replace(self.world, hosts=len(self.lead.hosts))

    def tell(self, order: dict) -> None:
        if self.leads:
            self._join(channel.JOIN_TIMEOUT_S)
            self.lead.send(order)

    def orders(self) -> Iterator[dict]:
        host, port = self._port()
        reading = channel.join(host, port, self.world.process_id)
        with reading:
            while True:
                message = channel.heard(reading)
                if message is None:
                    self.ending = {"code": 1, "error": "process 0 left the run without a word"}
                    return
                if message.get("end"):
                    self.ending = {"code": int(message.get("code") or 0), "error": message.get("error")}
                    return
                yield message

    def close(self, ending: dict) -> None:
        """Process 0: the others hear how the run ended -- those still to join too (only briefly after an
        error: its line is said here at once)."""
        if not self.leads:
            return
        try:
            self._join(channel.JOIN_TIMEOUT_S if ending.get("error") is None else END_GRACE_S)
        except (OSError, UserError):
            pass
        if self.lead is not None:
            with contextlib.suppress(OSError):
                self.lead.send({"end": True, **ending})
            self.lead.close()
            self.lead = None


def whole(name: str, value, low: int) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or int(text) < low:
        raise UserError(f"{name} must be a whole number of at least {low}, got {value!r}")
    return int(text)


def checked_coordinator(coordinator) -> str | None:
    if coordinator in (None, ""):
        return None
    text = str(coordinator).strip()
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65535:
        raise UserError(f"--coordinator must be HOST:PORT (process 0's address and a free port; the next port "
                        f"is used too), got {coordinator!r}")
    return text


def world_of(coordinator=None, num_processes=None, process_id=None) -> World:
    """The world of processes started by hand, checked; one clear line (UserError) for a bad value."""
    processes = 1 if num_processes in (None, "") else whole("--num-processes", num_processes, 1)
    pid = None if process_id in (None, "") else whole("--process-id", process_id, 0)
    coord = checked_coordinator(coordinator)
    if processes == 1:
        if coord is not None or pid is not None:
            raise UserError("--coordinator and --process-id need --num-processes P (P >= 2: how many "
                            "processes, one per host, take part)")
        return World()
    if pid is not None and pid >= processes:
        raise UserError(f"--process-id {pid} is out of range for --num-processes {processes} "
                        f"(ids are 0..{processes - 1})")
    if coord is None or pid is None:
        raise UserError(f"--num-processes {processes} needs --coordinator HOST:PORT (process 0's address) and "
                        f"--process-id I on every host, or start the processes with srun -n {processes} "
                        "(docs/distributed.md)")
    return World(coord, processes, pid)
