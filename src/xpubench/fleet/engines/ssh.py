"""``ssh = "user@host"`` (``python``: the interpreter there, default python3; ``workdir``: the folder the run
works in; ``ssh_args``: more options for OpenSSH's ssh, e.g. ["-p", "2222", "-i", "~/.ssh/lab"]): the run on
a box reached with ssh, which needs the same xpubench version installed there (docs/fleet.md).

One ssh session per machine, all at once: ``PYTHON -m xpubench.fleet.remote`` is sent the plan on stdin
and sends back the results as the run appends them (fleet/stream.py), into DIR/<name>.jsonl here; its stderr
is DIR/logs/<name>.log. Never a password prompt (BatchMode): a refused key, an unreachable host or another
xpubench version there is one line for that machine, and the others go on. Ctrl-C closes the session's
stdin: the run there unwinds (its finished cases already came back)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import threading
from typing import Any, ClassVar

from xpubench.errors import UserError
from xpubench.fleet.engines import ENDED, RUNNING, Engine, Job, tail
from xpubench.fleet.stream import messages, receive
from xpubench.legible.plaintext import shown

OPTIONS = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=30",
           "-o", "ServerAliveCountMax=4"]
STOP_WAIT_S = 90


class Ssh(Engine):
    name = "ssh"
    machine_keys: ClassVar[dict[str, str]] = {"python": "text", "workdir": "text", "ssh_args": "texts"}

    def settings(self, value: Any, where: str) -> dict:
        if not isinstance(value, str) or not value.strip() or value.startswith("-") or any(
                c.isspace() or ord(c) < 32 for c in value):
            raise UserError(f"{where}ssh must be a destination such as \"user@host\", got {shown(repr(value))[:60]}")
        return {"host": value}

    def check(self, machines: list, fleet) -> None:
        if shutil.which("ssh") is None:
            raise UserError(f"machine {machines[0].name!r}: ssh is not on PATH (OpenSSH's client)")

    def argv(self, machine) -> list[str]:
        remote = shlex.join([machine.options.get("python", "python3"), "-m", "xpubench.fleet.remote"])
        return ["ssh", *OPTIONS, *machine.options.get("ssh_args", []), "--", machine.settings["host"], remote]

    def command(self, machine, fleet) -> list[str]:
        return [shlex.join(self.argv(machine)) + "   # stdin: the plan; stdout: the results"]

    def start(self, machines: list, fleet) -> list[Job]:
        fleet.logs.mkdir(exist_ok=True)
        jobs = []
        for m in machines:
            job = Job(m.name, RUNNING, job_id=m.settings["host"], log=fleet.log(m.name))
            resume = m.name in fleet.resume
            request = json.dumps(fleet.request(m, resume)) + "\n"
            with open(job.log, "ab") as log:
                proc = subprocess.Popen(self.argv(m), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                        start_new_session=True)
            thread = threading.Thread(target=self._follow, args=(job, proc, request, fleet, resume), daemon=True)
            job.handle = {"process": proc, "thread": thread, "machine": m}
            thread.start()
            jobs.append(job)
        return jobs

    def _follow(self, job: Job, proc: subprocess.Popen, request: str, fleet, resume: bool) -> None:
        from xpubench.launch.runfile import held

        out = fleet.results(job.name)
        try:
            with held(out, create=not resume, what="fleet"):
                try:
                    proc.stdin.write(request.encode())
                    proc.stdin.flush()
                except OSError:
                    pass   # ssh already ended: its log says why
                lines = (raw.decode("utf-8", "surrogateescape") for raw in proc.stdout)
                job.handle["received"] = receive(messages(lines), out)
            if not resume and not out.stat().st_size:
                out.unlink()   # nothing came: no empty file for `report DIR` to refuse
        except UserError as exc:
            job.handle["refused"] = str(exc)
            proc.kill()

    def poll(self, jobs: list[Job]) -> None:
        for job in jobs:
            if job.phase != ENDED and not job.handle["thread"].is_alive():
                job.handle["process"].wait()
                self._settle(job)

    def _settle(self, job: Job) -> None:
        proc, got = job.handle["process"], job.handle.get("received")
        job.phase = ENDED
        if got is not None and got.exit_code is not None:
            job.exit_code = got.exit_code
            return
        machine = job.handle["machine"]
        said = tail(job.log, 1)
        if job.handle.get("refused"):
            job.ended = job.handle["refused"]
        elif got is not None and got.error:
            job.ended = got.error
        elif "No module named" in said or proc.returncode == 127:
            job.ended = (f"no xpubench with the fleet helper for {machine.options.get('python', 'python3')} on "
                         f"{machine.settings['host']} ({said}): install this xpubench version there (docs/fleet.md)")
        elif proc.returncode == 255:
            job.ended = f"ssh {machine.settings['host']}: {said or 'the connection failed'}"
        else:
            job.ended = f"the session ended (exit code {proc.returncode}) before the run did" + (
                f": {said}" if said else "")

    def cancel(self, jobs: list[Job]) -> None:
        live = [j for j in jobs if j.phase != ENDED]
        for job in live:
            try:
                job.handle["process"].stdin.close()   # the helper cancels the run there
            except OSError:
                pass
        for job in live:
            job.handle["thread"].join(STOP_WAIT_S)
            if job.handle["thread"].is_alive():
                job.handle["process"].kill()
                job.handle["thread"].join()
        self.poll(live)


ENGINE = Ssh()
