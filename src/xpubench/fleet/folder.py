"""DIR, the fleet's folder, as `site`, `report` and `compare` read it:

    DIR/<name>.jsonl             each machine's results (the machine entry in every record's fingerprint)
    DIR/<name>.jsonl.plan.json   its plan (what `xpubench run --resume` reads)
    DIR/fleet.toml               the fleet file as given: every machine's --config, what --resume DIR reads
    DIR/fleet.json               what was submitted where (Slurm job ids, manifests), for the user and --collect
    DIR/fleet.lock               held by the one `xpubench fleet` writing DIR (launch/runfile.py's lock)
    DIR/logs/                    each machine's output (its Slurm log, its ssh session's stderr, a pod's log)
    DIR/kubernetes/, DIR/skypilot/   the manifests and task files written for those engines

and the command each machine runs: `xpubench run --config DIR/fleet.toml -o DIR/<name>.jsonl` (``--resume
DIR/<name>.jsonl`` where its plan is there and cases are left), with the machine entry in
``XPUBENCH_FLEET_MACHINE``; ``python -m`` the module the CLI hands in (``run_module``: the layer that owns
`xpubench run`, above this one).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from xpubench.envnames import FLEET_MACHINE
from xpubench.errors import UserError
from xpubench.fleet.file import FleetFile, Machine
from xpubench.version import __version__


@dataclass
class Folder:
    path: Path                                    # absolute: the jobs may start elsewhere (--chdir, workdir)
    fleet: FleetFile
    run_module: str                               # "xpubench.cli": `python -m` it runs `xpubench run`
    resume: set[str] = field(default_factory=set)   # machines whose run is resumed (their plan is in DIR)
    submit: bool = False                           # kubernetes, skypilot: call kubectl / sky on their files

    def __post_init__(self) -> None:
        self.path = Path(os.path.abspath(self.path))

    @property
    def config(self) -> Path:
        return self.path / "fleet.toml"

    @property
    def state(self) -> Path:
        return self.path / "fleet.json"

    @property
    def lock(self) -> Path:
        return self.path / "fleet.lock"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    def results(self, name: str) -> Path:
        return self.path / f"{name}.jsonl"

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def python(self, machine: Machine, default: str = sys.executable) -> str:
        return str(machine.options.get("python") or default)

    def run_args(self, machine: Machine) -> list[str]:
        """The arguments after the interpreter (`xpubench run ...`) for ``machine`` in DIR."""
        return run_args(self.run_module, self.results(machine.name), self.config, machine.name in self.resume,
                        machine.tasks)

    def environment(self, machine: Machine) -> dict[str, str]:
        return {FLEET_MACHINE: machine.record_json()}

    def request(self, machine: Machine, resume: bool) -> dict:
        """What fleet/remote.py reads on the other side: the version, the plan (the fleet file), the machine,
        and for a resume the results and plan so far (only the plan goes over on a new run)."""
        blob = {"version": __version__, "name": machine.name, "machine": machine.record(),
                "config": self.fleet.text, "run_module": self.run_module, "tasks": machine.tasks,
                "workdir": machine.options.get("workdir")}
        if resume:
            blob["results"] = self.results(machine.name).read_text(encoding="utf-8", errors="surrogateescape")
            blob["plan"] = plan_of(self.results(machine.name)).read_text(encoding="utf-8")
        return blob

    def save_state(self, jobs: dict[str, dict]) -> None:
        from xpubench.results.store import write_atomically

        old = self.read_state()
        old.update(jobs)
        write_atomically(self.state, json.dumps(old, indent=1, sort_keys=True).encode())

    def read_state(self) -> dict:
        from xpubench import readfile

        if not self.state.exists():
            return {}
        try:
            blob = readfile.loads_json(readfile.read_text(self.state, "fleet state", 16 * readfile.MiB), "")
        except UserError:   # a damaged state file: what was submitted is in DIR/logs too
            return {}
        return blob if isinstance(blob, dict) else {}


def run_args(run_module: str, results: Path | str, config: Path | str, resume: bool, tasks: int = 1) -> list[str]:
    """``-m RUN_MODULE run --no-progress`` and the new run (``--config CONFIG -o RESULTS``) or its rest
    (``--resume RESULTS``); a run the engine starts as ``tasks`` processes across hosts adds
    ``--num-processes`` (each finds its rank in Slurm's variables)."""
    args = ["-m", run_module, "run", "--no-progress",
            *(["--resume", str(results)] if resume else ["--config", str(config), "-o", str(results)])]
    return args + (["--num-processes", str(tasks)] if tasks > 1 else [])


def plan_of(results: Path) -> Path:
    from xpubench.launch.runfile import plan_path

    return plan_path(results)
