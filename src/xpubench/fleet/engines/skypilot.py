"""``skypilot = { accelerators, cloud, region, instance_type, use_spot, image_id, setup }``: a SkyPilot task
in DIR/skypilot/<name>.yaml whose ``run`` is fleet/remote.py on the request file it mounts
(DIR/skypilot/<name>.request.json); ``setup`` installs xpubench there (``pip install xpubench==VERSION``).
``--submit``: ``sky launch -y -d -c xpubench-<name>``; the results come back in the job's log
(``--collect``: ``sky logs``). The cluster keeps running (and costing) until ``sky down xpubench-<name>``."""

from __future__ import annotations

import shlex
from typing import ClassVar

from xpubench.fleet.engines.handover import REQUEST, Handover
from xpubench.fleet.manifest import dump

RESOURCES = ("accelerators", "cloud", "region", "instance_type", "use_spot", "image_id")


def cluster_name(machine) -> str:
    return f"xpubench-{machine.name.lower().replace('_', '-').replace('.', '-')}"


class SkyPilot(Handover):
    name = "skypilot"
    tool = "sky"
    keys: ClassVar[dict[str, str]] = {"accelerators": "text", "cloud": "text", "region": "text",
                                      "instance_type": "text", "use_spot": "flag", "image_id": "text", "setup": "text"}
    machine_keys: ClassVar[dict[str, str]] = {"python": "text"}

    def request_file(self, machine, fleet):
        return fleet.path / self.name / f"{machine.name}.request.json"

    def task(self, machine, fleet) -> dict:
        s = machine.settings
        task = {"name": cluster_name(machine), "resources": {k: s[k] for k in RESOURCES if k in s},
                "num_nodes": 1, "file_mounts": {REQUEST: str(self.request_file(machine, fleet).resolve())}}
        if s.get("setup"):
            task["setup"] = s["setup"]
        task["run"] = shlex.join(self.remote_command(machine))
        return task

    def text(self, machine, fleet) -> str:
        return f"# xpubench fleet {fleet.path}: machine {machine.name}\n" + dump(self.task(machine, fleet))

    def start(self, machines: list, fleet):
        for m in machines:
            path = self.request_file(m, fleet)
            path.parent.mkdir(exist_ok=True)
            path.write_text(self.request(m, fleet), encoding="utf-8")
        return super().start(machines, fleet)

    def submit_argv(self, machine, path) -> list[str]:
        return ["sky", "launch", "-y", "-d", "-c", cluster_name(machine), str(path)]

    def logs_argv(self, machine) -> list[str]:
        return ["sky", "logs", "--no-follow", cluster_name(machine)]


ENGINE = SkyPilot()
