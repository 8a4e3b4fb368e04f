"""``kubernetes = { image, namespace, resources, queue }``: an Indexed Job (one completion, no retry: a
failed run is a result, not something to repeat) whose pod runs fleet/remote.py on the request a ConfigMap
beside it holds, in DIR/kubernetes/<name>.yaml. ``image`` must hold this xpubench version; ``resources``
is the container's (``{ limits = { "nvidia.com/gpu" = 1 } }``); ``queue`` a Kueue LocalQueue (the
``kueue.x-k8s.io/queue-name`` label: Kueue admits the Job when its quota allows). ``--submit``: ``kubectl
apply -f``; the results come back in the pod's log (``--collect``: ``kubectl logs job/NAME``)."""

from __future__ import annotations

import re
from typing import ClassVar

from xpubench.errors import UserError
from xpubench.fleet.engines.handover import REQUEST, Handover
from xpubench.fleet.manifest import dump

KUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MAX_NAME = 63   # the pods carry the Job's name as a label value


def object_name(machine) -> str:
    """``xpubench-<name>`` as Kubernetes names objects: lower case, '-' for '_' and '.'."""
    return f"xpubench-{re.sub(r'[^a-z0-9-]', '-', machine.name.lower())}"[:MAX_NAME].rstrip("-")


def quantities(value):
    """``resources`` with each number a quantity string ("nvidia.com/gpu" = 1 -> "1"), as the API's models type
    them (the kubernetes client refuses the number)."""
    if isinstance(value, dict):
        return {k: quantities(v) for k, v in value.items()}
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


class Kubernetes(Handover):
    name = "kubernetes"
    tool = "kubectl"
    keys: ClassVar[dict[str, str]] = {"image": "text", "namespace": "text", "resources": "table", "queue": "text"}
    required = ("image",)
    machine_keys: ClassVar[dict[str, str]] = {"python": "text"}

    def check(self, machines: list, fleet) -> None:
        seen: dict[str, str] = {}
        for m in machines:
            name = object_name(m)
            if name in seen:
                raise UserError(f"machines {seen[name]!r} and {m.name!r} would both be Kubernetes Job {name!r}: "
                                "rename one")
            seen[name] = m.name
        super().check(machines, fleet)

    def manifest(self, machine, fleet) -> list[dict]:
        s, name = machine.settings, object_name(machine)
        labels = {"app.kubernetes.io/name": "xpubench", "app.kubernetes.io/component": "fleet"}
        meta = {"name": name, **({"namespace": s["namespace"]} if s.get("namespace") else {}), "labels": labels}
        folder = REQUEST.rsplit("/", 1)[0]
        container = {"name": "xpubench", "image": s["image"], "command": self.remote_command(machine),
                     "volumeMounts": [{"name": "request", "mountPath": folder, "readOnly": True}]}
        if s.get("resources"):
            container["resources"] = quantities(s["resources"])
        job_labels = {**labels, **({KUEUE_LABEL: s["queue"]} if s.get("queue") else {})}
        config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                  "data": {REQUEST.rsplit("/", 1)[1]: self.request(machine, fleet)}}
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {**meta, "labels": job_labels},
               "spec": {"completionMode": "Indexed", "completions": 1, "parallelism": 1, "backoffLimit": 0,
                        "template": {"metadata": {"labels": labels}, "spec": {
                            "restartPolicy": "Never", "containers": [container],
                            "volumes": [{"name": "request", "configMap": {"name": name}}]}}}}
        return [config, job]

    def text(self, machine, fleet) -> str:
        return f"# xpubench fleet {fleet.path}: machine {machine.name}\n" + dump(*self.manifest(machine, fleet))

    def submit_argv(self, machine, path) -> list[str]:
        return ["kubectl", "apply", "-f", str(path)]

    def logs_argv(self, machine) -> list[str]:
        namespace = machine.settings.get("namespace")
        return ["kubectl", "logs", f"job/{object_name(machine)}", *(["-n", namespace] if namespace else [])]


ENGINE = Kubernetes()
