"""Where this process sits in a run that spans several processes (hosts): the coordinator's address,
the number of processes and this one's id. Framework-free: the plan and the CLI read it too.

Set by ``xpubench run --coordinator HOST:PORT --num-processes P --process-id I`` (the CLI exports the
values as XPUBENCH_* variables, so every worker process inherits them) or by those variables directly;
the coordinator also falls back to JAX's own ``JAX_COORDINATOR_ADDRESS``. With P processes, a case's
device count N counts the devices of all of them: each process drives N / P of its local devices.

- JAX: every worker calls ``jax.distributed.initialize(coordinator, P, I)``; the coordinator and the
  id may be left out where JAX detects them itself (Cloud TPU pods, SLURM, Open MPI, Kubernetes).
- PyTorch: every worker starts torchrun's engine (``torch.distributed.launcher.elastic_launch``) as
  one node of P, rendezvousing at the coordinator (c10d backend); the coordinator is required.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

from xpubench import envnames
from xpubench.errors import UserError

ENV = {"coordinator": envnames.COORDINATOR, "num_processes": envnames.NUM_PROCESSES,
       "process_id": envnames.PROCESS_ID}
JAX_COORDINATOR_ENV = "JAX_COORDINATOR_ADDRESS"


@dataclass(frozen=True)
class Cluster:
    coordinator: str | None = None    # "host:port" of process 0 (JAX coordinator, torch rendezvous)
    num_processes: int = 1
    process_id: int | None = None     # None: detected by the engine

    @property
    def multi(self) -> bool:
        return self.num_processes > 1


def _whole(name: str, value, low: int) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or int(text) < low:
        raise UserError(f"{name} must be a whole number of at least {low}, got {value!r}")
    return int(text)


def budget_note(cluster: Cluster) -> str | None:
    """Why a run over several processes has no time budget (None for one process): each host would
    admit or skip cases by its own clock and estimates, so near the end one host could start a case
    another skips, and wait for it until the join timeout (then pair the next cases wrongly)."""
    if not cluster.multi:
        return None
    return (f"no run budget across {cluster.num_processes} processes: every host must run the same cases in "
            "the same order, and a budget decides from each host's own clock; bound the run with -w/-p "
            "instead")


def parse(coordinator=None, num_processes=None, process_id=None) -> Cluster:
    """Checked settings (each None when not given); one clear line (UserError) for a bad value."""
    processes = 1 if num_processes in (None, "") else _whole("--num-processes", num_processes, 1)
    pid = None if process_id in (None, "") else _whole("--process-id", process_id, 0)
    coord = None if coordinator in (None, "") else str(coordinator).strip()
    if coord is not None:
        host, sep, port = coord.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UserError(f"--coordinator must be HOST:PORT (process 0's address and a free port), "
                            f"got {coordinator!r}")
    if processes == 1 and (coord is not None or pid is not None):
        raise UserError("--coordinator and --process-id need --num-processes P (P >= 2: how many "
                        "processes, one per host, take part)")
    if pid is not None and pid >= processes:
        raise UserError(f"--process-id {pid} is out of range for --num-processes {processes} "
                        f"(ids are 0..{processes - 1})")
    return Cluster(coord, processes, pid)


def from_env(environ: Mapping[str, str] | None = None) -> Cluster:
    env = os.environ if environ is None else environ
    processes = env.get(ENV["num_processes"])
    if not processes:  # one process: a stray JAX_COORDINATOR_ADDRESS alone does not make a cluster
        return Cluster()
    coordinator = env.get(ENV["coordinator"]) or env.get(JAX_COORDINATOR_ENV)
    return parse(coordinator, processes, env.get(ENV["process_id"]))


@contextlib.contextmanager
def exported(cluster: Cluster):
    """``export`` for the duration of a ``with`` block (a run called in-process leaves no trace)."""
    saved = {name: os.environ.get(name) for name in ENV.values()}
    export(cluster)
    try:
        yield cluster
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def export(cluster: Cluster, environ: MutableMapping[str, str] | None = None) -> None:
    """Write the settings where worker processes inherit them (os.environ by default)."""
    env = os.environ if environ is None else environ
    for field, name in ENV.items():
        value = getattr(cluster, field)
        if value is None or (field == "num_processes" and value == 1):
            env.pop(name, None)
        else:
            env[name] = str(value)
