"""The Kubernetes Indexed Job manifest and the SkyPilot task file `xpubench fleet` writes (issue 49 item 6),
validated: always against the schemas below (the fields xpubench writes, each checked for its kind, any
other field refused; written with the results schema's own checks, results/validate.py), and with each
tool's own library where it is installed: the kubernetes client's models (every field read back as the
model has it; the client is in the test extra) and SkyPilot's task loader (``sky.Task.from_yaml``: its JSON
schema and resources). SkyPilot is not in the test extra (it pulls in a web server, databases and ~50
packages); with it in a virtual environment:

    python3 -m venv --system-site-packages /tmp/sky && /tmp/sky/bin/pip install skypilot
    PYTHONPATH=src /tmp/sky/bin/python -m pytest -q tests/test_fleet_manifests.py

Nothing here reaches a cluster: ``--submit`` is tested against a kubectl with no cluster to talk to."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from xpubench import cli
from xpubench.results.validate import Invalid, list_of, map_of, one_of, record, whole
from xpubench.version import __version__

FLEET = """[run]
workload = ["matmul"]
backend = ["numpy"]
size = [64]
processes = 2

[[machine]]
name = "h100_pod"
[machine.kubernetes]
image = "ghcr.io/lab/xpubench:0.1"
namespace = "bench"
queue = "gpu-queue"
resources = { limits = { "nvidia.com/gpu" = 1, cpu = "8" }, requests = { memory = "32Gi" } }

[[machine]]
name = "cloud.h100"
skypilot = { accelerators = "H100:1", cloud = "aws", use_spot = true, setup = "pip install xpubench" }
"""
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?")


def refuse(value, at: str) -> None:
    raise Invalid(f"{at} is not a field xpubench writes")


def matching(pattern: re.Pattern, what: str, most: int = 253):
    def check(value, at: str) -> None:
        if not isinstance(value, str) or not pattern.fullmatch(value) or len(value) > most:
            raise Invalid(f"{at} must be {what}, got {value!r}")
    return check


def text(value, at: str) -> None:
    if not isinstance(value, str) or not value:
        raise Invalid(f"{at} must be a non-empty string, got {value!r}")


def label_map(value, at: str) -> None:
    map_of(matching(re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"), "a label value", 63))(value, at)
    for key in value:
        matching(LABEL_KEY, "a label key")(key, f"{at} key")


def quantity(value, at: str) -> None:
    if not (isinstance(value, str) and QUANTITY.fullmatch(value)):   # a string, as the client's models type it
        raise Invalid(f"{at} must be a quantity (\"8\", \"500m\", \"32Gi\"), got {value!r}")


NAME = matching(DNS_LABEL, "a DNS label", 63)
META = record({"name": NAME, "namespace": NAME, "labels": label_map}, required=("name",), rest=refuse)
CONFIGMAP = record({"apiVersion": one_of("v1"), "kind": one_of("ConfigMap"), "metadata": META,
                    "data": map_of(text)}, required=("apiVersion", "kind", "metadata", "data"), rest=refuse)
CONTAINER = record({"name": NAME, "image": text, "command": list_of(text),
                    "resources": record({"limits": map_of(quantity), "requests": map_of(quantity)}, rest=refuse),
                    "volumeMounts": list_of(record({"name": NAME, "mountPath": text, "readOnly": one_of(True, False)},
                                                   required=("name", "mountPath"), rest=refuse))},
                   required=("name", "image"), rest=refuse)
POD = record({"restartPolicy": one_of("Never", "OnFailure"), "containers": list_of(CONTAINER),
              "volumes": list_of(record({"name": NAME, "configMap": record({"name": NAME}, required=("name",),
                                                                             rest=refuse)},
                                        required=("name",), rest=refuse))},
             required=("restartPolicy", "containers"), rest=refuse)
JOB = record({"apiVersion": one_of("batch/v1"), "kind": one_of("Job"), "metadata": META,
              "spec": record({"completionMode": one_of("Indexed", "NonIndexed"), "completions": whole(1),
                              "parallelism": whole(1), "backoffLimit": whole(0),
                              "template": record({"metadata": record({"labels": label_map}, rest=refuse), "spec": POD},
                                                 required=("spec",), rest=refuse)},
                             required=("template",), rest=refuse)},
             required=("apiVersion", "kind", "metadata", "spec"), rest=refuse)
SKY_TASK = record({"name": text, "num_nodes": whole(1), "setup": text, "run": text,
                   "resources": record({"accelerators": text, "cloud": text, "region": text, "instance_type": text,
                                        "use_spot": one_of(True, False), "image_id": text}, rest=refuse),
                   "file_mounts": map_of(text)}, required=("run",), rest=refuse)


@pytest.fixture
def written(tmp_path, capsys, monkeypatch):
    """`xpubench fleet FLEET -o DIR` (no --submit): the two files written, nothing submitted."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fleet.toml").write_text(FLEET)
    code = cli.main(["fleet", "fleet.toml", "-o", "out"])
    said = capsys.readouterr().out
    assert code == 0, said
    return tmp_path / "out", said


def _request(blob: str) -> dict:
    request = json.loads(blob)
    assert request["version"] == __version__ and request["config"] == FLEET
    assert "results" not in request   # only the plan goes over
    return request


def test_the_kubernetes_manifest_is_an_indexed_job_that_holds_the_plan(written):
    out, said = written
    path = out / "kubernetes" / "h100_pod.yaml"
    assert f"h100_pod: written: {path}:" in said
    assert f"submit it with `kubectl apply -f {path}`, then `xpubench fleet --collect {out}`" in said
    config, job = yaml.safe_load_all(path.read_text())
    CONFIGMAP(config, "configmap")
    JOB(job, "job")
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["backoffLimit"] == 0
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"
    assert job["metadata"]["name"] == config["metadata"]["name"] == "xpubench-h100-pod"
    assert job["metadata"]["namespace"] == config["metadata"]["namespace"] == "bench"
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "1", "cpu": "8"}, "requests": {"memory": "32Gi"}}
    assert pod["volumes"] == [{"name": "request", "configMap": {"name": "xpubench-h100-pod"}}]
    mount = container["volumeMounts"][0]["mountPath"]
    assert container["command"][1:] == ["-m", "xpubench.fleet.remote", "--request", f"{mount}/request.json"]
    request = _request(config["data"]["request.json"])
    assert request["machine"]["name"] == "h100_pod" and request["machine"]["engine"] == "kubernetes"


def test_the_skypilot_task_runs_the_helper_on_the_request_it_mounts(written):
    out, said = written
    path = out / "skypilot" / "cloud.h100.yaml"
    assert f"submit it with `sky launch -y -d -c xpubench-cloud-h100 {path}`" in said
    task = yaml.safe_load(path.read_text())
    SKY_TASK(task, "task")
    assert task["resources"] == {"accelerators": "H100:1", "cloud": "aws", "use_spot": True}
    (remote, local), = task["file_mounts"].items()
    assert task["run"].endswith(f"-m xpubench.fleet.remote --request {remote}")
    assert task["setup"] == "pip install xpubench"
    assert _request(Path(local).read_text())["machine"]["name"] == "cloud.h100"


def test_the_schemas_refuse_what_kubernetes_or_skypilot_would(written):
    out, _ = written
    config, job = yaml.safe_load_all((out / "kubernetes" / "h100_pod.yaml").read_text())
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy "] = "Always"
    with pytest.raises(Invalid, match="imagePullPolicy"):
        JOB(job, "job")
    config["metadata"]["name"] = "H100_pod"
    with pytest.raises(Invalid, match="DNS label"):
        CONFIGMAP(config, "configmap")
    with pytest.raises(Invalid, match="num_nodes"):
        SKY_TASK({"run": "x", "num_nodes": 0}, "task")


def test_the_manifest_reads_back_through_the_kubernetes_clients_models(written):
    client = pytest.importorskip("kubernetes.client", reason="the kubernetes client is not installed (see the "
                                 "module docstring)")
    out, _ = written
    api = client.ApiClient()
    for doc, model in zip(yaml.safe_load_all((out / "kubernetes" / "h100_pod.yaml").read_text()),
                          ("V1ConfigMap", "V1Job")):
        try:   # the models check their required fields
            obj = api.deserialize(json.dumps(doc), model, "application/json")   # client 35 and later
        except TypeError:
            obj = api.deserialize(type("Response", (), {"data": json.dumps(doc)})(), model)
        assert api.sanitize_for_serialization(obj) == doc   # and every field written is one of theirs


def test_the_task_loads_with_skypilots_task_loader(written):
    sky = pytest.importorskip("sky", reason="SkyPilot is not installed (see the module docstring)")
    out, _ = written
    task = sky.Task.from_yaml(str(out / "skypilot" / "cloud.h100.yaml"))
    assert task.num_nodes == 1 and "xpubench.fleet.remote" in task.run
    (resources,) = task.resources
    assert resources.accelerators == {"H100": 1} and resources.use_spot


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_submit_calls_kubectl_and_its_refusal_is_that_machines_line(tmp_path, capsys, monkeypatch):
    """No cluster here: kubectl's own error becomes the machine's line; the manifest stays for a later apply."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kubeconfig").write_text("")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))   # nothing of this machine's is reached
    (tmp_path / "fleet.toml").write_text(FLEET.split("[[machine]]\nname = \"cloud.h100\"")[0])
    code = cli.main(["fleet", "fleet.toml", "-o", "out", "--submit"])
    said = capsys.readouterr().out
    assert code == 3, said
    assert f"h100_pod: failed: kubectl apply -f {tmp_path / 'out' / 'kubernetes' / 'h100_pod.yaml'} failed:" in said
    assert (tmp_path / "out" / "kubernetes" / "h100_pod.yaml").exists()
