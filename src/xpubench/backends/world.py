"""The world a case's worker was handed by its run's launcher (launch/launchers/): how many processes
(``xpubench run`` processes, one per host as a rule) take part, which one this is, where process 0
listens, and on how many machines they sit. Framework-free: a backend reads it to do its own framework's
part -- ``jax.distributed.initialize(coordinator, num_processes, process_id)``, torch's c10d rendezvous
at the coordinator with ``num_processes`` nodes -- and decides nothing about ranks or hosts itself.

The launcher hands it over in the worker's environment (``environment``: XPUBENCH_* variables, as
torchrun hands its workers RANK and WORLD_SIZE), so the ranks a backend starts inherit it too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from xpubench import envnames

VARIABLES = {"coordinator": envnames.COORDINATOR, "num_processes": envnames.NUM_PROCESSES,
             "process_id": envnames.PROCESS_ID, "hosts": envnames.HOSTS}


@dataclass(frozen=True)
class World:
    coordinator: str | None = None   # process 0's HOST:PORT: the frameworks' rendezvous (several processes)
    num_processes: int = 1
    process_id: int = 0
    hosts: int | None = None         # the machines the processes sit on (None: not known yet)

    @property
    def multi(self) -> bool:
        return self.num_processes > 1

    def host_port(self) -> tuple[str, int]:
        host, _, port = (self.coordinator or "").rpartition(":")
        return host.strip("[]"), int(port)

    def environment(self) -> dict[str, str | None]:
        """The XPUBENCH_* values a worker is handed (None: the variable is removed)."""
        if not self.multi:
            return dict.fromkeys(VARIABLES.values())
        return {name: None if getattr(self, field) is None else str(getattr(self, field))
                for field, name in VARIABLES.items()}


def handed(environ: Mapping[str, str] | None = None) -> World:
    """The world this worker was handed (one process when none was)."""
    env = os.environ if environ is None else environ
    if not env.get(envnames.NUM_PROCESSES):
        return World()
    hosts = env.get(envnames.HOSTS)
    return World(env.get(envnames.COORDINATOR), int(env[envnames.NUM_PROCESSES]),
                 int(env.get(envnames.PROCESS_ID) or 0), int(hosts) if hosts else None)
