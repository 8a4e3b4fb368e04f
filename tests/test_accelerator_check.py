"""scripts/accelerator_check.sh, the first hour on a GPU or TPU: its plan for recorded machines, its
behaviour on this CPU (device steps skipped with the reason, exit 0, its folder written), its step and
total time limits. The dry runs take seconds; the real run on this CPU is marked slow."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from machine_facts import MACHINES

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "accelerator_check.sh"


def check(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    import os

    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), PYTHON=sys.executable, **(env_extra or {}))
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env,
                          check=False, stdin=subprocess.DEVNULL)


def module():
    """The script's module, loaded fresh (a test may patch its limits)."""
    spec = importlib.util.spec_from_file_location("accelerator_check", ROOT / "scripts" / "accelerator_check.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_an_h100_is_planned_with_every_step_and_its_commands(tmp_path):
    done = check("--dry-run", "--env-file", str(MACHINES / "h100-sxm.json"), "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "nvidia-h100-80gb-hbm3"
    summary = json.loads((folder / "summary.json").read_text())
    assert [s["name"] for s in summary["steps"]] == ["env", "doctor", "tests", "default", "ceilings", "sweep"]
    assert {s["status"] for s in summary["steps"]} == {"dry run"}
    logs = "\n".join(line for s in summary["steps"] for line in s["logs"])
    assert "-m pytest -m gpu -ra" in logs and "xpubench doctor --json" in logs
    assert "xpubench ceilings -b torch,jax -d gpu:0 -p fp32,bf16" in logs
    assert f"-o {folder}/default.jsonl" in logs and "-d gpu --mode train,infer --quick" in logs
    assert json.loads((folder / "env.json").read_text())["host"]["hostname"] == "h100-node"
    assert "DRY RUN" in (folder / "summary.md").read_text()


def test_a_tpu_vm_is_checked_with_jax_only(tmp_path):
    done = check("--dry-run", "--env-file", str(MACHINES / "tpu-v5e-8.json"), "--out", str(tmp_path))
    logs = (tmp_path / "tpu-v5-lite" / "summary.md").read_text()
    assert done.returncode == 0 and "-m pytest -m tpu" in logs and "ceilings -b jax -d tpu:0" in logs


def test_on_this_cpu_the_device_steps_are_skipped_saying_why_and_it_ends_0(tmp_path):
    done = check("--out", str(tmp_path), env_extra={"XPUBENCH_CHECK_DRY": "1"})   # detection runs, nothing else
    assert done.returncode == 0, done.stderr
    (folder,) = tmp_path.iterdir()
    steps = {s["name"]: s for s in json.loads((folder / "summary.json").read_text())["steps"]}
    if any(d["kind"] != "cpu" for b in json.loads((folder / "env.json").read_text())["backends"].values()
           for d in b.get("devices", [])):
        pytest.skip("this machine has an accelerator")
    assert folder.name.startswith("cpu-") and steps["env"]["status"] == "ok"
    for name in ("tests", "default", "ceilings", "sweep"):
        assert steps[name]["status"] == "skipped" and "needs a GPU, TPU or Apple GPU" in steps[name]["reason"]
    assert "Skipped because they need a device: tests, default, ceilings, sweep." in done.stdout


def test_env_file_without_dry_run_is_refused(tmp_path):
    done = check("--env-file", str(MACHINES / "h100-sxm.json"), "--out", str(tmp_path))
    assert done.returncode == 2 and "use it with --dry-run" in done.stderr and not list(tmp_path.iterdir())


def test_a_step_is_killed_at_its_limit_and_none_starts_past_the_total(tmp_path, monkeypatch):
    check_mod = module()
    slow = check_mod.Step("slow", "sleeps", [[sys.executable, "-c", "import time; time.sleep(30)"]], "slow.txt")
    check_mod.run_step(slow, tmp_path, limit_s=1.0, dry=False)
    assert slow.status == "timed out" and slow.seconds < 10
    failing = check_mod.Step("bad", "fails", [[sys.executable, "-c", "import sys; sys.exit('broken')"]])
    check_mod.run_step(failing, tmp_path, limit_s=30, dry=False)
    assert failing.status == "failed" and failing.reason == "exit 1: broken"
    monkeypatch.setattr(check_mod, "TOTAL_LIMIT_S", 0)                   # the 45 minutes are spent
    code = check_mod.main(["--dry-run", "--env-file", str(MACHINES / "mi300x.json"), "--out", str(tmp_path)])
    steps = json.loads((tmp_path / "amd-instinct-mi300x" / "summary.json").read_text())["steps"]
    assert code == 0 and {s["status"] for s in steps[1:]} == {"skipped"}
    assert "total is spent" in steps[1]["reason"]
    assert module().STEP_LIMIT_S < 600 and module().TOTAL_LIMIT_S <= 45 * 60


@pytest.mark.slow
def test_the_real_check_on_this_cpu_runs_env_and_doctor_and_ends_0(tmp_path):
    done = check("--out", str(tmp_path))
    (folder,) = tmp_path.iterdir()
    steps = {s["name"]: s for s in json.loads((folder / "summary.json").read_text())["steps"]}
    assert done.returncode == 0, done.stdout + done.stderr
    assert steps["doctor"]["status"] == "ok"
    assert json.loads((folder / "doctor.json").read_text())[0]["check"] == "environment"
    assert "PASS" in steps["doctor"]["reason"]
