"""Launchers: how a run's processes start and where each sits, one declared choice per run (``local``,
``hosts``, ``srun``: base.py says what each is and does).

    declared(coordinator, num_processes, process_id)   the run's launcher, from the flags (else the
                                                       XPUBENCH_* variables) and where it was started
    running(launcher)                                  the run's launcher while it runs (``active()``: the
                                                       planner and the runner ask it), its end told to the
                                                       others
    srun_command(run_argv, ntasks, nodes)              the line that starts a run as a Slurm step's tasks
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping

from xpubench import envnames
from xpubench.errors import UserError
from xpubench.launch.launchers.base import Launcher
from xpubench.launch.launchers.hosts import Hosts, world_of
from xpubench.launch.launchers.slurm import Srun, srun_command, srun_world, step_tasks

__all__ = ["Hosts", "Launcher", "Srun", "active", "declared", "running", "srun_command"]

_RUNNING: list[Launcher] = []


def declared(coordinator=None, num_processes=None, process_id=None,
             environ: Mapping[str, str] | None = None) -> Launcher:
    """The run's launcher: ``srun`` in a Slurm step of several tasks, ``hosts`` where the flags (or, none
    given, the XPUBENCH_* variables) name several processes, else ``local``. One line for a bad value."""
    env = os.environ if environ is None else environ
    if env.get("TORCHELASTIC_RUN_ID") or env.get("LOCAL_RANK"):
        raise UserError("xpubench starts its own ranks (torchrun's engine) for each case: run it once per host, "
                        "not under torchrun, with --coordinator/--num-processes/--process-id or under srun "
                        "(docs/distributed.md)")
    if all(v is None for v in (coordinator, num_processes, process_id)):
        coordinator, num_processes, process_id = (env.get(envnames.COORDINATOR), env.get(envnames.NUM_PROCESSES),
                                                  env.get(envnames.PROCESS_ID))
    if step_tasks(env) > 1:
        return Srun(srun_world(env, coordinator, num_processes, process_id))
    world = world_of(coordinator, num_processes, process_id)
    return Hosts(world) if world.multi else Launcher()


def active() -> Launcher:
    """The launcher of the run in progress in this process (``local`` outside ``running``)."""
    return _RUNNING[-1] if _RUNNING else Launcher()


@contextlib.contextmanager
def running(launcher: Launcher, told: bool = True):
    """``launcher`` is the run's while the block runs: process 0 ready for the others to join from the
    start, and at the end the others hear how it ended (the exit code and line of an error, as the CLI
    says them); neither where not ``told`` (a dry run: each process plans, or not, alone)."""
    _RUNNING.append(launcher)
    ending: dict = {"code": 0, "error": None}
    try:
        if told:
            launcher.open()
        yield launcher
    except BaseException as exc:
        code = 130 if isinstance(exc, KeyboardInterrupt) else 2 if isinstance(exc, (UserError, OSError)) else 1
        ending = {"code": code, "error": " ".join(str(exc).split()) or type(exc).__name__}
        raise
    finally:
        _RUNNING.remove(launcher)
        if told:
            launcher.close(ending)
