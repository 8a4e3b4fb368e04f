"""The launcher interface: how the processes of a run start and where each sits (docs/architecture.md,
"Launchers"). A run has exactly one, declared when it starts (``launchers.declared``):

- ``local``: this process alone;
- ``hosts``: several ``xpubench run`` processes started by hand, one per host (--coordinator,
  --num-processes, --process-id), launchers/hosts.py;
- ``srun``: the tasks of a Slurm job step (``srun -n P xpubench run ...``), launchers/slurm.py.

Every launcher starts each case's worker on its own host in one of two ways (``start_worker``): forked
from a server that imported the case's framework (launch/forkserver.py) or a fresh interpreter (spawn).
With several processes, process 0 plans, decides (the budget, what an OOM or a failure stops) and writes
the results; before each worker it starts it ``tell``s the others, which start the same worker (``orders``,
launch/follower.py): every process runs the same cases in the same order, as one group per case.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import ClassVar

from xpubench import backends
from xpubench.backends.world import World
from xpubench.launch import forkserver


class Launcher:
    """One process alone (``local``); the base of the launchers of several processes."""

    name: ClassVar[str] = "local"

    def __init__(self, world: World | None = None) -> None:
        self.world = world or World()
        self.ending: dict = {"code": 0, "error": None}   # another process: process 0's last word (``orders``)

    @property
    def leads(self) -> bool:
        """Whether this process plans, decides and writes the results (process 0)."""
        return self.world.process_id == 0

    def open(self) -> None:
        """Process 0, as the run starts: ready for the others to join (they connect while it plans)."""

    def tell(self, order: dict) -> None:
        """Process 0: the worker it starts next (the case, its process, timeout and memory limit), which
        every other process then starts too."""

    def orders(self) -> Iterator[dict]:
        """Another process: process 0's orders, one per worker, until the run ends (then its last word is
        ``ending``)."""
        return iter(())

    def close(self, ending: dict) -> None:
        """The run ended (``{"code": exit code, "error": its line or None}``): the others hear it."""

    def worker_environment(self, env: dict[str, str]) -> None:
        """What a worker is handed: this process's place in the run (backends/world.py reads it)."""
        for name, value in self.world.environment().items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value

    def start_worker(self, case, how: str, argv: list[str], env: dict[str, str], log, timeout_s: float,
                     process: int):
        """The worker process of ``case`` and how it started (``how``: forkserver.method's): forked from a
        server that has imported the case's framework, or a fresh interpreter (``spawn``; also where a
        server can't start)."""
        from xpubench.launch.worker import prepare_environment

        if how == "forkserver":
            server_env = dict(env)
            prepare_environment(case.device, server_env)   # before the server's imports, as the worker does
            try:
                preload = backends.record(case.backend).preload_modules(case.backend)
                return forkserver.start_worker(argv, env, server_env, preload, log.name, timeout_s, process), how
            except forkserver.ServerGone as exc:
                log.write(f"xpubench: spawning the worker instead: {exc}\n".encode())
                log.flush()
        return subprocess.Popen(
            [sys.executable, "-m", "xpubench.launch.worker", *argv],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
            start_new_session=True,  # own process group: a timeout kills the worker and its children
        ), "spawn"
