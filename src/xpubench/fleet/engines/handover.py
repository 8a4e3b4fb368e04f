"""What kubernetes and skypilot share: each machine's run is a file written into DIR/<engine>/ (a manifest, a
task file) holding the request fleet/remote.py reads; with ``--submit`` the cluster's own tool (kubectl, sky)
is called on it, when on PATH. Nothing follows the run from here: the helper's messages go to the pod's or
the task's log, and ``xpubench fleet --collect DIR`` reads that log (fetched with the same tool, or put in
DIR/logs/<name>.log by hand) into DIR/<name>.jsonl."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

from xpubench.errors import UserError
from xpubench.fleet.engines import ENDED, SUBMITTED, WRITTEN, Engine, Job
from xpubench.legible.plaintext import shown

COMMAND_S = 600
REQUEST = "/etc/xpubench-fleet/request.json"   # where the run's request lies on the other side


class Handover(Engine):
    follows = False
    tool = ""          # kubectl, sky

    def file(self, machine, fleet) -> Path:
        return fleet.path / self.name / f"{machine.name}.yaml"

    def text(self, machine, fleet) -> str:
        """The manifest or task file."""
        raise NotImplementedError

    def submit_argv(self, machine, path: Path) -> list[str]:
        raise NotImplementedError

    def logs_argv(self, machine) -> list[str]:
        """The command that prints the run's log (the helper's messages among its lines)."""
        raise NotImplementedError

    def request(self, machine, fleet) -> str:
        return json.dumps(fleet.request(machine, resume=False))

    def remote_command(self, machine) -> list[str]:
        return [machine.options.get("python", "python3"), "-m", "xpubench.fleet.remote", "--request", REQUEST]

    def check(self, machines: list, fleet) -> None:
        if fleet.submit and shutil.which(self.tool) is None:
            raise UserError(f"machine {machines[0].name!r}: --submit calls {self.tool}, which is not on PATH (without "
                            f"--submit the fleet writes the {self.name} files for you to submit)")

    def command(self, machine, fleet) -> list[str]:
        return [f"{self.file(machine, fleet)}:", *self.text(machine, fleet).splitlines()]

    def start(self, machines: list, fleet) -> list[Job]:
        jobs = []
        for m in machines:
            path = self.file(m, fleet)
            path.parent.mkdir(exist_ok=True)
            path.write_text(self.text(m, fleet), encoding="utf-8")
            job = Job(m.name, WRITTEN, job_id=str(path), log=fleet.log(m.name))
            if fleet.submit:
                argv = self.submit_argv(m, path)
                try:
                    proc = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_S, check=False)
                    failed = proc.returncode != 0
                    said = " ".join((proc.stderr or proc.stdout).split())
                except (OSError, subprocess.TimeoutExpired) as exc:
                    failed, said = True, str(exc)
                if failed:
                    job.phase, job.ended = ENDED, f"{shlex.join(argv)} failed: {shown(said)[-300:]}"
                else:
                    job.phase = SUBMITTED
            jobs.append(job)
        return jobs

    def fetch_log(self, machine, fleet) -> str | None:
        """The run's log fetched with the tool into DIR/logs/<name>.log; None where done, else why not."""
        if shutil.which(self.tool) is None:
            return f"{self.tool} is not on PATH"
        argv = self.logs_argv(machine)
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=COMMAND_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
        if proc.returncode != 0:
            return f"{shlex.join(argv)}: " + " ".join(proc.stderr.decode(errors="replace").split())[-300:]
        fleet.logs.mkdir(exist_ok=True)
        fleet.log(machine.name).write_bytes(proc.stdout)
        return None

    def next_step(self, machine, fleet) -> str:
        collect = f"`xpubench fleet --collect {fleet.path}` once it ran"
        if fleet.submit:
            return collect
        return f"submit it with `{shlex.join(self.submit_argv(machine, self.file(machine, fleet)))}`, then {collect}"

    def cancel(self, jobs: list[Job]) -> None:
        """Nothing is followed here: a submitted job is the cluster's (delete it with its own tool)."""
