"""``slurm = { partition, time, gres, account, setup, sbatch_args }``: a batch job per machine, submitted
with ``sbatch --parsable`` (machines with the same settings: one job array, a task each), followed with
``squeue``; a job's final state from ``sacct`` where the cluster keeps accounting, else from ``scontrol show
job`` (which remembers a finished job for MinJobAge seconds). Ctrl-C: ``scancel`` of these job ids only.

The job writes DIR/<name>.jsonl itself: DIR must be on a file system the compute nodes share with this
host (as home and project folders are on a cluster). ``nodes``/``ntasks`` above 1: the run is started by
``srun --ntasks`` on every task, which finds its rank in Slurm's variables (docs/distributed.md)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
from typing import ClassVar

from xpubench.errors import UserError
from xpubench.fleet.engines import ENDED, QUEUED, RUNNING, Engine, Job
from xpubench.legible.plaintext import shown

OPTIONS = {"partition": "--partition", "time": "--time", "gres": "--gres", "account": "--account"}
QUEUED_STATES = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SUSPENDED",
                 "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED"}
RUN_EXITS = {0, 1, 2, 3}   # `xpubench run`'s own exit codes (docs/bad-input.md): the run itself ended
COMMAND_S = 60
CANCEL_WAIT_S = 90


def slurm(*argv: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=COMMAND_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(list(argv), 255, "", f"{argv[0]}: {exc}")


def _said(proc: subprocess.CompletedProcess) -> str:
    return shown(" ".join((proc.stderr or proc.stdout or f"exit code {proc.returncode}").split()))[:300]


class Slurm(Engine):
    name = "slurm"
    keys: ClassVar[dict[str, str]] = {"partition": "text", "time": "text", "gres": "text", "account": "text",
                                      "setup": "text", "sbatch_args": "texts"}
    machine_keys: ClassVar[dict[str, str]] = {"python": "text", "workdir": "text", "nodes": "whole", "ntasks": "whole"}

    def check(self, machines: list, fleet) -> None:
        if shutil.which("sbatch") is None:
            raise UserError(f"machine {machines[0].name!r}: sbatch is not on PATH (a slurm machine is submitted "
                            "from a host where Slurm's commands run, such as a login node)")
        wanted = {m.settings["partition"] for m in machines if "partition" in m.settings}
        if not wanted:
            return
        proc = slurm("sinfo", "-h", "-o", "%R")
        if proc.returncode != 0:
            raise UserError(f"cannot list Slurm's partitions (sinfo): {_said(proc)}")
        known = set(proc.stdout.split())
        for m in machines:
            part = m.settings.get("partition")
            if part is not None and part not in known:
                raise UserError(f"machine {m.name!r}: partition '{shown(part)}' is not one of this cluster's "
                                f"({', '.join(sorted(known)) or 'none'}; `sinfo`)")

    def sbatch(self, machine, fleet, array: int = 1) -> list[str]:
        """The sbatch command line of ``machine``'s settings (an array of ``array`` tasks), before the script."""
        s, o = machine.settings, machine.options
        args = ["sbatch", "--parsable", f"--job-name=xpubench-{machine.name}"]
        args += [f"{flag}={s[key]}" for key, flag in OPTIONS.items() if key in s]
        args += [f"--{key}={o[key]}" for key in ("nodes", "ntasks") if key in o]
        if o.get("workdir"):
            args.append(f"--chdir={o['workdir']}")
        logs = fleet.logs
        args += ([f"--array=0-{array - 1}", f"--output={logs}/slurm-%A_%a.log"] if array > 1
                 else [f"--output={logs}/slurm-%j.log"])
        return args + list(s.get("sbatch_args", []))

    def script(self, machines: list, fleet) -> str:
        """The batch script: the machine of each array task, its setup, then the run (under srun for ntasks)."""
        first = machines[0]
        lines = ["#!/bin/bash", f"# xpubench fleet {fleet.path}: {', '.join(m.name for m in machines)}", "set -u",
                 'case "${SLURM_ARRAY_TASK_ID:-0}" in']
        for i, m in enumerate(machines):
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in fleet.environment(m).items())
            command = shlex.join([fleet.python(m), *fleet.run_args(m)])
            lines.append(f"  {i}) export {env}; RUN={shlex.quote(command)} ;;")
        lines.append("esac")
        if first.settings.get("setup"):
            lines.append(first.settings["setup"])
        srun = f"srun --ntasks={first.tasks} " if first.tasks > 1 else ""
        lines.append(f"eval exec {srun}\"$RUN\"")
        return "\n".join(lines) + "\n"

    def groups(self, machines: list) -> list[list]:
        """The machines whose sbatch settings are the same, together: one job array (a task each)."""
        groups: dict[str, list] = {}
        for m in machines:
            groups.setdefault(json.dumps([m.settings, m.options], sort_keys=True), []).append(m)
        return list(groups.values())

    def describe(self, machines: list, fleet) -> list[str]:
        lines = []
        for group in self.groups(machines):
            array = f", one job array of {len(group)}" if len(group) > 1 else ""
            lines += [f"{', '.join(m.name for m in group)} (slurm{array}):",
                      "  " + shlex.join([*self.sbatch(group[0], fleet, len(group)), "SCRIPT"]), "  SCRIPT:",
                      *("    " + line for line in self.script(group, fleet).splitlines())]
        return lines

    def start(self, machines: list, fleet) -> list[Job]:
        fleet.logs.mkdir(exist_ok=True)
        jobs: list[Job] = []
        for group in self.groups(machines):
            path = fleet.logs / f"{group[0].name}.sbatch"
            path.write_text(self.script(group, fleet))
            proc = slurm(*self.sbatch(group[0], fleet, len(group)), str(path))
            if proc.returncode != 0:
                jobs += [Job(m.name, ENDED, ended=f"sbatch refused it: {_said(proc)}") for m in group]
                continue
            base = proc.stdout.strip().split(";")[0]
            for i, m in enumerate(group):
                job_id = f"{base}_{i}" if len(group) > 1 else base
                log = fleet.logs / (f"slurm-{base}_{i}.log" if len(group) > 1 else f"slurm-{base}.log")
                jobs.append(Job(m.name, QUEUED, job_id=job_id, log=log))
        return jobs

    def poll(self, jobs: list[Job]) -> None:
        live = [j for j in jobs if j.phase != ENDED and j.job_id]
        if not live:
            return
        ids = sorted({j.job_id.split("_")[0] for j in live})
        proc = slurm("squeue", "-h", "--array", "-j", ",".join(ids), "-o", "%i|%T")
        if proc.returncode != 0 and "Invalid job id" not in proc.stderr:
            return   # the controller did not answer: ask again at the next poll
        states = dict(line.split("|", 1) for line in proc.stdout.split() if "|" in line)
        gone = []
        for job in live:
            state = states.get(job.job_id)
            if state is None:
                gone.append(job)
            else:
                job.phase = QUEUED if state in QUEUED_STATES else RUNNING
        if gone:
            final = final_states(sorted({j.job_id.split("_")[0] for j in gone}))
            for job in gone:
                settle(job, final.get(job.job_id))

    def cancel(self, jobs: list[Job]) -> None:
        live = [j for j in jobs if j.phase != ENDED and j.job_id]
        if live:
            slurm("scancel", *[j.job_id for j in live])
        deadline = time.monotonic() + CANCEL_WAIT_S   # each run unwinds (results kept) before Slurm kills it
        while any(j.phase != ENDED for j in live) and time.monotonic() < deadline:
            time.sleep(1)
            self.poll(live)
        for job in live:
            if job.phase != ENDED:
                job.phase, job.ended = ENDED, "Slurm: cancelled (still leaving the queue)"


def settle(job: Job, final: tuple[str, int | None] | None) -> None:
    """A job that left the queue: the run's exit code, or Slurm's state where Slurm ended it."""
    job.phase = ENDED
    if final is None:
        job.ended = ("Slurm: left the queue, its final state no longer known (no accounting on this cluster, "
                     "and scontrol forgets a job MinJobAge seconds after it ends)")
        return
    state, code = final
    if state in ("COMPLETED", "FAILED") and code in RUN_EXITS:
        job.exit_code = code
    else:
        job.ended = f"Slurm: {state}" + (f" (exit code {code})" if code else "")


def final_states(ids: list[str]) -> dict[str, tuple[str, int | None]]:
    """{job id (123, or 123_0 for an array's task): (state, exit code)} from sacct, else scontrol."""
    proc = slurm("sacct", "-n", "-P", "-X", "-j", ",".join(ids), "-o", "JobID,State,ExitCode")
    found = parse_sacct(proc.stdout) if proc.returncode == 0 else {}
    if found:
        return found
    for base in ids:
        found.update(parse_scontrol(slurm("scontrol", "show", "job", "-o", base).stdout))
    return found


def _code(text: str) -> int | None:
    head = text.split(":")[0]
    return int(head) if head.isdigit() else None


def parse_sacct(text: str) -> dict[str, tuple[str, int | None]]:
    """``sacct -n -P -X -o JobID,State,ExitCode`` lines ("123_0|CANCELLED by 0|0:15")."""
    out = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1]:
            out[parts[0]] = (parts[1].split()[0], _code(parts[2]))
    return out


def parse_scontrol(text: str) -> dict[str, tuple[str, int | None]]:
    """``scontrol show job -o ID`` lines (one per job, or per task of an array): JobState and ExitCode."""
    out = {}
    for line in text.splitlines():
        fields = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
        if "JobState" not in fields:
            continue
        task = fields.get("ArrayTaskId")
        job_id = f"{fields['ArrayJobId']}_{task}" if task and "ArrayJobId" in fields else fields.get("JobId", "")
        out[job_id] = (fields["JobState"], _code(fields.get("ExitCode", "")))
    return out


ENGINE = Slurm()
