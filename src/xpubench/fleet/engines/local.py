"""``local = true``: the run on this machine, in a child process (`xpubench run`, folder.py), the local
machines one after another (two runs at once would measure each other)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from typing import Any, ClassVar

from xpubench.errors import UserError
from xpubench.fleet.engines import ENDED, QUEUED, RUNNING, Engine, Job

STOP_WAIT_S = 60   # a cancelled run unwinds (its worker killed, its results kept) before it is killed


class Local(Engine):
    name = "local"
    machine_keys: ClassVar[dict[str, str]] = {"python": "text", "workdir": "text"}

    def settings(self, value: Any, where: str) -> dict:
        if value is not True:
            raise UserError(f"{where}local must be true")
        return {}

    def command(self, machine, fleet) -> list[str]:
        where = f"cd {shlex.quote(machine.options['workdir'])} && " if machine.options.get("workdir") else ""
        return [where + shlex.join([fleet.python(machine), *fleet.run_args(machine)])]

    def start(self, machines: list, fleet) -> list[Job]:
        fleet.logs.mkdir(exist_ok=True)
        return [Job(m.name, log=fleet.log(m.name), handle={"machine": m, "fleet": fleet}) for m in machines]

    def poll(self, jobs: list[Job]) -> None:
        for job in jobs:
            proc = job.handle.get("process")
            if job.phase == RUNNING and proc.poll() is not None:
                job.phase, job.exit_code = ENDED, proc.returncode
        if not any(j.phase == RUNNING for j in jobs):
            waiting = next((j for j in jobs if j.phase == QUEUED), None)
            if waiting is not None:
                self._launch(waiting)

    def _launch(self, job: Job) -> None:
        machine, fleet = job.handle["machine"], job.handle["fleet"]
        with open(job.log, "ab") as log:
            job.handle["process"] = subprocess.Popen(
                [fleet.python(machine), *fleet.run_args(machine)], stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env={**os.environ, **fleet.environment(machine)},
                cwd=machine.options.get("workdir"), start_new_session=True)   # Ctrl-C reaches the fleet only
        job.phase, job.job_id = RUNNING, f"pid {job.handle['process'].pid}"

    def cancel(self, jobs: list[Job]) -> None:
        for job in jobs:
            if job.phase == QUEUED:
                job.phase, job.ended = ENDED, "cancelled before it started"
            elif job.phase == RUNNING:
                stop(job.handle["process"])
                job.phase, job.exit_code = ENDED, job.handle["process"].returncode


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM (the run unwinds like Ctrl-C: its worker killed, every finished case kept), SIGKILL if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


ENGINE = Local()
