"""The ``srun`` launcher: a run's processes are the tasks of a Slurm job step, ``srun -n P xpubench run ...``
(a fleet machine's ``nodes`` / ``ntasks`` writes that line: ``srun_command``). Slurm starts them and
numbers them (SLURM_PROCID of SLURM_STEP_NUM_TASKS); process 0 is the step's first task, on the step's
first node, and the run's port comes from the job and step ids -- what JAX's own Slurm detection
(jax/_src/clusters/slurm_cluster.py) and torchrun users' MASTER_ADDR / MASTER_PORT read. Everything
else is the ``hosts`` launcher's (launchers/hosts.py).

An ``sbatch`` script itself is not a step (its SLURM_STEP_* are unset): ``xpubench run`` there runs alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from xpubench.backends.world import World
from xpubench.errors import UserError
from xpubench.launch.launchers.hosts import Hosts, checked_coordinator, whole

FIRST_PORT = 61440     # the run's ports: an even one of 61440..65534 and the next (as JAX's: the top 4096)


class Srun(Hosts):
    name = "srun"


def step_tasks(environ: Mapping[str, str]) -> int:
    """The tasks of the Slurm step this process is one of (0 outside a step: a login shell, an sbatch script)."""
    tasks = environ.get("SLURM_STEP_NUM_TASKS", "")
    return int(tasks) if tasks.isdigit() and environ.get("SLURM_STEP_NODELIST") else 0


def first_host(nodelist: str) -> str:
    """The first host of a Slurm host list: ``node[001-015],gpu7`` -> node001, ``a[1-2]-b[3,4]`` -> a1-b3."""
    depth, end = 0, len(nodelist)
    for i, ch in enumerate(nodelist):
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            end = i
            break
    return re.sub(r"\[([^\]]*)\]", lambda m: re.split(r"[,-]", m.group(1))[0], nodelist[:end].strip())


def port_of(environ: Mapping[str, str]) -> int:
    """The run's port from its job and step ids (every task computes the same)."""
    job, step = environ.get("SLURM_JOB_ID", "0"), environ.get("SLURM_STEP_ID", "0")
    key = (int(job) if job.isdigit() else 0) * 8 + (int(step) if step.isdigit() else 0)
    return FIRST_PORT + 2 * (key % 2048)


def srun_world(environ: Mapping[str, str], coordinator=None, num_processes=None, process_id=None) -> World:
    """This task's world, checked against the flags given: --num-processes must be the step's task count,
    --process-id is Slurm's to give, --coordinator (HOST:PORT) replaces the derived address."""
    tasks = step_tasks(environ)
    if process_id not in (None, ""):
        raise UserError("srun numbers its tasks (SLURM_PROCID): drop --process-id")
    if num_processes not in (None, "") and whole("--num-processes", num_processes, 1) != tasks:
        raise UserError(f"--num-processes {num_processes} but this srun step has {tasks} tasks: start it with "
                        f"srun -n {num_processes}, or drop --num-processes")
    coord = checked_coordinator(coordinator) or f"{first_host(environ['SLURM_STEP_NODELIST'])}:{port_of(environ)}"
    return World(coord, tasks, int(environ.get("SLURM_PROCID", "0")))


def srun_command(run_argv: Sequence[str], ntasks: int | None = None, nodes: int | None = None) -> list[str]:
    """The line that runs ``run_argv`` (a whole ``xpubench run`` command line: ``["xpubench", "run", "-w",
    ...]``) as one run over P processes, the tasks of a Slurm job step, inside an allocation of at least
    that many (an sbatch job with the same ``--nodes`` / ``--ntasks``). P is ``ntasks``, else ``nodes`` (one
    process per node). ``--kill-on-bad-exit``: a process that stops on an error ends the others at once."""
    if ntasks is None and nodes is None:
        raise UserError("a run over several processes needs nodes or ntasks")
    processes = whole("ntasks", ntasks, 1) if ntasks is not None else whole("nodes", nodes, 1)
    line = ["srun", f"--ntasks={processes}", "--kill-on-bad-exit=1"]
    if nodes is not None:
        count = whole("nodes", nodes, 1)
        if count > processes:
            raise UserError(f"nodes = {count} is more than ntasks = {processes}: one process per node at least")
        line.insert(1, f"--nodes={count}")
        if ntasks is None:
            line.insert(3, "--ntasks-per-node=1")
    return [*line, *run_argv, "--num-processes", str(processes)]
