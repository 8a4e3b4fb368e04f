"""A fourth backend that xpubench does not know: tests/plugins/xpubench_fakefw, registered the way a
package installed beside xpubench registers (an ``xpubench.backends`` entry point), is planned, detected,
measured by the harness's loops, reported and compared without a line of xpubench changed for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import report_runs

from xpubench import backends

PLUGINS = Path(__file__).parent / "plugins"


def installed_plugin(site: Path) -> dict:
    """What ``pip install`` of the plugin leaves: a dist-info with its entry point; the environment
    of a process that sees it."""
    info = site / "xpubench_fakefw-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: xpubench-fakefw\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[xpubench.backends]\nfakefw = xpubench_fakefw\n")
    path = os.pathsep.join([str(site), str(PLUGINS), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path}


def xpubench(env: dict, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "xpubench", *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600, check=False)


@pytest.fixture
def with_plugin(monkeypatch):
    """The plugin registered in this process (the entry point's effect on the registry)."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    backends._registry.cache_clear()
    monkeypatch.setattr(backends, "REGISTRY", {**backends.REGISTRY, "fakefw": "xpubench_fakefw"})
    yield
    backends._registry.cache_clear()


def test_the_planner_plans_a_plugin_backend_for_the_workloads_of_its_family(with_plugin):
    from xpubench.plan import PlanRequest, build_cases

    assert "fakefw" in backends.names() and backends.get("fakefw").title == "FakeFW (a plugin)"
    host = {"cpu": {"flags": []}}
    env = {"host": host, "backends": {"fakefw": {"installed": True, "devices": [{"id": "cpu", "kind": "cpu"}]}}}
    cases = build_cases(PlanRequest(backends=["fakefw"], workloads=["matmul", "mnist_cnn", "gpt"], quick=True), env)
    planned = {(c.workload, c.mode, c.precision) for c in cases}
    assert ("matmul", "matmul", "fp32") in planned and ("mnist_cnn", "train", "fp32") in planned
    assert ("gpt", "train", "fp32") in planned                       # every workload with a torch model
    assert {c.backend for c in cases} == {"fakefw"}


@pytest.mark.slow
def test_a_plugin_backend_runs_reports_and_compares_end_to_end(tmp_path, with_plugin, capsys, monkeypatch):
    """`xpubench list` and `xpubench run` in processes that find the plugin only through its installed entry
    point; the run's record holds what detection found (the environment `xpubench env --json` prints: the
    same detection child, which a second process only ran again); the report and the comparison of its
    results in this process, where the plugin is registered (with_plugin) as the entry point registers it."""
    from xpubench.cli import main

    env = installed_plugin(tmp_path / "site")
    listing = xpubench(env, "list", cwd=tmp_path)
    assert listing.returncode == 0 and "fakefw" in listing.stdout
    small = ["-b", "fakefw", "-w", "matmul,mnist_cnn", "--size", "128", "--batch-size", "32", "--epochs", "2",
             "--steps", "2", "--train-samples", "64", "--eval-samples", "32", "--processes", "1",
             "--time-budget", "1", "--no-progress"]
    run = xpubench(env, "run", *small, "-o", "a.jsonl", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    # the second file the report and compare read: a copy (a second run of the same cases showed nothing more
    # about the plugin, and cost a third of the test)
    (tmp_path / "b.jsonl").write_bytes((tmp_path / "a.jsonl").read_bytes())
    records = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert {(r["case"]["workload"], r["case"]["backend"], r["status"]) for r in records} == {
        ("matmul", "fakefw", "ok"), ("mnist_cnn", "fakefw", "ok")}
    found = records[0]["fingerprint"]["backends"]
    assert found["fakefw"]["installed"] and found["fakefw"]["devices"][0]["id"] == "cpu"
    trained = next(r for r in records if r["case"]["workload"] == "mnist_cnn")
    assert trained["metrics"]["samples_per_s"] > 0 and trained["metrics"]["flops_per_sample"] > 0
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    report_runs.quick_charts(monkeypatch)   # the plugin's rows in the page are read, not its charts' pixels
    assert main(["report", str(a), str(b), "-o", str(tmp_path / "report.html")]) == 0, capsys.readouterr().err
    assert "fakefw" in (tmp_path / "report.html").read_text()
    capsys.readouterr()
    code = main(["compare", str(a), str(b)])
    out, err = capsys.readouterr()
    assert code == 0 and "mnist_cnn/fakefw/cpu/train" in out, err
