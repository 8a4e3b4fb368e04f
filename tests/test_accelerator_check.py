"""scripts/accelerator_check.sh, the accelerator check of a short job: its plan for the recorded machines
(every step in value order, the whole plan within 8 minutes), its budget (--minutes, SLURM_JOB_END_TIME),
a fake device whose steps take too long on a fake clock (every step cut at its share, the check within
its budget), a job killed at any step (summary.md / summary.json still say what finished), the process
group killed at a step's limit, and plain pytest without the test extra's plugins. The real run on this
CPU is marked slow."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import cpu_check
import pytest
from bad_input_doc import Case, check_row, run_case
from machine_facts import MACHINES

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "accelerator_check.sh"
sys.path.insert(0, str(ROOT / "scripts"))
import accelerator_check as check_mod
import accelerator_check_plan as plan_mod

STEPS = ["env", "doctor", "matmul", "bandwidth", "train", "llama", "tests"]
RECORDED = ["h100-sxm", "h200-sxm", "a100-sxm4-80gb", "mi300x", "tpu-v5e-8", "apple-m2"]


def check(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          env=cpu_check.check_environment(env_extra), check=False, stdin=subprocess.DEVNULL)


def machine(name: str) -> dict:
    return json.loads((MACHINES / f"{name}.json").read_text())


def summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())


def test_an_h100_is_planned_in_value_order_within_8_minutes(tmp_path):
    done = check("--dry-run", "--minutes", "8", "--env-file", str(MACHINES / "h100-sxm.json"), "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "nvidia-h100-80gb-hbm3"
    data = summary(folder)
    assert [s["name"] for s in data["steps"]] == STEPS and {s["status"] for s in data["steps"]} == {"dry run"}
    assert data["budget_s"] == 480 and data["planned_s"] <= 480 and data["within_budget"]
    logs = "\n".join(c for s in data["steps"] for c in s["commands"])
    assert "xpubench doctor --json -b torch,jax -d gpu" in logs
    assert "xpubench ceilings -b torch,jax -d gpu:0 -p bf16,fp32 --no-bandwidth --refresh --budget" in logs
    assert "xpubench ceilings -b torch,jax -d gpu:0 --bandwidth-only --refresh --json" in logs
    assert "run -w cifar10_resnet --mode train --quick -b torch,jax -d gpu:0 -p bf16 --processes 2" in logs
    assert f"run -w llama -b torch,jax -d gpu:0 -p bf16 --processes 2 --budget 65 --no-progress -o {folder}" in logs
    assert "-m pytest -o addopts= -p no:cacheprovider -p no:random_order -m gpu -ra -v tests/test_gpt.py " \
           "tests/test_accelerators_e2e.py" in logs
    assert json.loads((folder / "env.json").read_text())["host"]["hostname"] == "h100-node"
    assert "DRY RUN" in (folder / "summary.md").read_text()
    assert "794.5 TFLOP/s" in data["steps"][2]["note"] and "torch 2.4.1+cu124 (oldest supported 2.6)" in \
        data["steps"][0]["note"]
    assert "total            475  of 480 s (8 minutes): fits" in done.stdout


@pytest.mark.parametrize("name", RECORDED)
def test_every_recorded_machine_is_planned_within_8_minutes(name, tmp_path, capsys):
    code = check_mod.main(["--dry-run", "--minutes", "8", "--env-file", str(MACHINES / f"{name}.json"),
                           "--out", str(tmp_path)], environ={})
    (folder,) = tmp_path.iterdir()
    data = summary(folder)
    assert code == 0 and data["planned_s"] <= 480 and data["elapsed_s"] <= 480
    for step in data["steps"]:
        assert step["status"] == "dry run" and step["planned_s"] >= plan_mod.SHARES[step["name"]][1], step
    assert ": fits" in capsys.readouterr().out


def test_each_machine_gets_its_frameworks_device_and_precision(tmp_path):
    def commands(name: str) -> str:
        steps = plan_mod.plan(machine(name), "py")
        return "\n".join(" ".join(c.argv) for s in steps for c in s.build(60.0)) + "\n" + \
            "\n".join(s.note for s in steps)

    tpu = commands("tpu-v5e-8")
    assert "ceilings -b jax -d tpu:0" in tpu and "run -w llama -b jax -d tpu:0 -p bf16" in tpu and "-m tpu" in tpu
    m2 = commands("apple-m2")      # bf16 is emulated on the M2 and torch 2.4.1 cannot train fp16 on MPS
    assert "-b torch -d mps -p fp32" in m2 and "doctor --json -b torch -d mps" in m2
    a100 = commands("a100-sxm4-80gb")   # jax without flax/optax: ceilings yes, models no
    assert "ceilings -b torch,jax -d gpu:0" in a100 and "-w llama -b torch -d gpu:0 -p bf16" in a100
    assert "jax left out: its models need flax and optax (not installed)" in a100
    assert "older than supported" not in commands("h200-sxm")
    assert "ceilings -b torch,jax -d gpu:0" in commands("mi300x")


def test_the_budget_comes_from_minutes_or_the_jobs_end(monkeypatch):
    now = 1_800_000_000.0
    assert plan_mod.job_budget(None, {}, now) == (480.0, "the default 8 minutes (no job end time found)")
    assert plan_mod.job_budget(3, {"SLURM_JOB_END_TIME": "soon"}, now)[0] == 180
    seconds, said = plan_mod.job_budget(None, {"SLURM_JOB_END_TIME": str(int(now) + 600)}, now)
    assert seconds == 580 and "SLURM_JOB_END_TIME" in said
    seconds, said = plan_mod.job_budget(15, {"SLURM_JOB_END_TIME": str(int(now) + 300)}, now)
    assert seconds == 280 and "under --minutes 15" in said
    assert plan_mod.job_budget(4, {"SLURM_JOB_END_TIME": str(int(now) + 3600)}, now)[0] == 240


@pytest.mark.parametrize("end", ["9" * 400, "1" + "0" * 15, "1e400", "nan", "inf", str(1_800_000_000 + 400 * 86400),
                                 str(1_800_000_000 - 400 * 86400), "1800000000." + "5" * 400])
def test_a_job_end_time_not_within_a_year_is_ignored_saying_so(end):
    """The digits check alone let 400 digits through to float(): an infinite budget, then an OverflowError."""
    now = 1_800_000_000.0
    seconds, said = plan_mod.job_budget(None, {"SLURM_JOB_END_TIME": end}, now)
    assert seconds == 480 and "is not a time within a year: ignored" in said and len(said) < 120
    seconds, said = plan_mod.job_budget(3, {"SLURM_JOB_END_TIME": end}, now)
    assert seconds == 180 and said.startswith("--minutes 3 (SLURM_JOB_END_TIME")


def doc_cases(folder: Path) -> list[Case]:
    """docs/bad-input.md's rows of the accelerator check: a scheduler's or a shell's number it cannot believe."""
    machine_file = folder / "h100.json"
    machine_file.write_text((MACHINES / "h100-sxm.json").read_text())
    argv = f"bash scripts/accelerator_check.sh --dry-run --env-file {machine_file} --out {folder}"
    return [
        Case("a job end time of 400 digits", argv, "budget 480 s: the default 8 minutes (SLURM_JOB_END_TIME "
             "'99999999999999999999...' is not a time within a year: ignored)", code=0,
             env={"SLURM_JOB_END_TIME": "9" * 400}),
        Case("the same with --minutes", argv + " --minutes 3", "budget 180 s: --minutes 3 (SLURM_JOB_END_TIME", code=0,
             env={"SLURM_JOB_END_TIME": "9" * 400}),
        Case("a start time of 400 digits", argv, "budget 480 s: the default 8 minutes (no job end time found)", code=0,
             env={"XPUBENCH_CHECK_T0": "9" * 400, "SLURM_JOB_END_TIME": ""}),
    ]


@pytest.mark.parametrize("index", range(3))
def test_a_number_from_the_environment_beyond_belief_is_not_a_traceback(index, tmp_path):
    case = doc_cases(tmp_path)[index]
    outcome = run_case(case)
    check_row(case, outcome)
    assert summary(next(p for p in tmp_path.iterdir() if p.is_dir()))["budget_s"] in (480, 180)


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class SlowDevice:
    """A fake device whose every command runs past its limit: the clock moves to the limit, the command
    writes part of its output and is "killed" (None). ``kill_at``: the job itself dies (SIGKILL: nothing
    runs after) when that step's first command starts; ``stop_at``: a SIGTERM arrives there."""

    def __init__(self, clock: FakeClock, kill_at: str | None = None, stop_at: str | None = None, ok=False):
        self.clock, self.kill_at, self.stop_at, self.ok, self.calls = clock, kill_at, stop_at, ok, []

    def __call__(self, argv, stdout: Path, log: Path, timeout_s: float, env: dict):
        step = log.stem
        self.calls.append((step, timeout_s))
        if step == self.kill_at:
            raise KeyboardInterrupt("SIGKILL")     # stands for the process vanishing: no handler runs
        if step == self.stop_at:
            raise check_mod.Stopped(signal.SIGTERM)
        stdout.write_text(json.dumps([{"check": "placement", "status": "PASS"}]) if step == "doctor" else "partial")
        if self.ok:
            self.clock.now += 1.0
            return 0
        self.clock.now += timeout_s
        return None


def fake_check(tmp_path, device: SlowDevice, clock: FakeClock, budget_s: float = 480.0) -> check_mod.Check:
    return check_mod.Check(machine("h100-sxm"), tmp_path, budget_s, "--minutes 8", py="py", clock=clock,
                           runner=device, environ={})


def test_a_device_whose_steps_take_too_long_is_cut_step_by_step_within_the_budget(tmp_path):
    clock = FakeClock()
    device = SlowDevice(clock)
    code = fake_check(tmp_path, device, clock).run()
    data = summary(tmp_path / "nvidia-h100-80gb-hbm3")
    assert code == 0 and data["state"] == "finished" and data["elapsed_s"] <= 480 and data["within_budget"]
    assert [s["status"] for s in data["steps"]] == ["cut"] * 7     # each killed at its limit, none skipped
    for step, (name, timeout) in zip(data["steps"], device.calls):
        assert step["name"] == name and step["seconds"] == step["limit_s"] == pytest.approx(timeout, abs=0.5)
        assert "killed at its" in step["reason"]
    assert sum(s["seconds"] for s in data["steps"]) <= 480 - plan_mod.RESERVE_S
    assert (tmp_path / "nvidia-h100-80gb-hbm3" / "doctor.json").exists()


def test_time_a_step_leaves_goes_to_the_next_and_a_step_that_cannot_fit_is_skipped_saying_why(tmp_path):
    clock = FakeClock()
    fast = fake_check(tmp_path, SlowDevice(clock, ok=True), clock)
    fast.run()
    steps = {s["name"]: s for s in summary(fast.folder)["steps"]}
    assert steps["tests"]["limit_s"] > steps["tests"]["planned_s"] + 300     # what the others left
    clock = FakeClock()
    short = fake_check(tmp_path / "short", SlowDevice(clock), clock, budget_s=150)
    short.run()
    statuses = {s["name"]: (s["status"], s["reason"]) for s in summary(short.folder)["steps"]}
    assert [statuses[n][0] for n in STEPS] == ["cut"] * 4 + ["skipped", "skipped", "cut"]   # the first ones first
    assert "which needs at least 45 s" in statuses["train"][1] and summary(short.folder)["elapsed_s"] <= 150


@pytest.mark.parametrize("at", STEPS)
def test_a_job_killed_during_any_step_leaves_a_complete_summary(at, tmp_path):
    clock = FakeClock()
    run = fake_check(tmp_path, SlowDevice(clock, kill_at=at), clock)
    with pytest.raises(KeyboardInterrupt):
        run.run()
    folder = tmp_path / "nvidia-h100-80gb-hbm3"
    data = summary(folder)                          # what was on disk when the process died
    index = STEPS.index(at)
    assert [s["name"] for s in data["steps"]] == STEPS and data["state"] == f"running {at}"
    assert [s["status"] for s in data["steps"]] == ["cut"] * index + ["running"] + ["pending"] * (6 - index)
    assert all(s["planned_s"] for s in data["steps"][index:])        # what would have run, and for how long
    md = (folder / "summary.md").read_text()
    assert f"state: running {at} -- if the job has ended, it was killed during this step" in md
    assert md.count("\n| ") == 8 and not list(folder.glob(".*.tmp"))


@pytest.mark.parametrize("at", ["doctor", "llama"])
def test_sigterm_during_a_step_ends_the_check_saying_so(at, tmp_path):
    clock = FakeClock()
    code = fake_check(tmp_path, SlowDevice(clock, stop_at=at), clock).run()
    data = summary(tmp_path / "nvidia-h100-80gb-hbm3")
    statuses = {s["name"]: s["status"] for s in data["steps"]}
    assert code == 128 + signal.SIGTERM and data["state"] == f"stopped by SIGTERM during {at}"
    assert statuses[at] == "stopped" and statuses["tests"] == "skipped"


def running(pid: int, within_s: float = 5.0) -> bool:
    """Whether ``pid`` still runs ``within_s`` after a signal was sent to it (a signalled process ends when
    the kernel next schedules it: on a loaded machine not always before the caller reads /proc; one whose
    parent died may linger as a zombie until reaped)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] == "Z":
                return False
        except FileNotFoundError:
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_step_at_its_limit_is_killed_with_its_whole_process_group(tmp_path):
    """KILL_GRACE_S + 6 s of limit: 6 s before the SIGTERM, time enough on a loaded machine for the child (an
    interpreter that imports only subprocess) to start its own child and say its pid; the test waits it out."""
    script = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; "
              "time.sleep(60)']); print(p.pid, flush=True); time.sleep(60)")
    out = tmp_path / "out.txt"
    code = check_mod.run_command([sys.executable, "-c", script], out, tmp_path / "x.log", plan_mod.KILL_GRACE_S + 6,
                                 dict(os.environ))
    grandchild = int(out.read_text().split()[0])
    assert code is None and not running(grandchild)
    assert check_mod.run_command([sys.executable, "-c", "import sys; sys.exit(3)"], out, tmp_path / "x.log", 30,
                                 dict(os.environ)) == 3


def test_bad_arguments_are_one_line_and_exit_2(tmp_path):
    done = check("--env-file", str(MACHINES / "h100-sxm.json"), "--out", str(tmp_path))
    assert done.returncode == 2 and "use it with --dry-run" in done.stderr and not list(tmp_path.iterdir())
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    done = check("--dry-run", "--env-file", str(bad), "--out", str(tmp_path))
    assert done.returncode == 2 and "is not an environment record" in done.stderr and len(done.stderr.splitlines()) == 1
    done = check("--minutes", "0", "--out", str(tmp_path))
    assert (done.returncode == 2 and "expected minutes between 0 and 1440" in done.stderr
            and "Traceback" not in done.stderr)


def test_plain_pytest_without_the_test_extras_plugins_collects_the_device_tests(tmp_path):
    """What a compute node has: pytest alone. No "unrecognized arguments" from pyproject's addopts, and a
    test module whose optional import (here hypothesis, hidden; --assert=plain, or pytest's rewriting
    import hook would find it first) is missing is skipped, not an error."""
    runner = tmp_path / "plain_pytest.py"
    runner.write_text(textwrap.dedent("""
        import importlib.abc, sys
        class Hide(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name.split(".")[0] == "hypothesis":
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        sys.meta_path.insert(0, Hide())
        import pytest
        sys.exit(pytest.main(["-p", "no:random_order", "-p", "no:timeout", "-p", "no:hypothesispytest",
                              "-p", "no:cacheprovider", "--assert=plain", "-m", "gpu", "tests/test_accelerators_e2e.py",
                              "tests/test_hostile_property.py"]))
    """))
    done = subprocess.run([sys.executable, str(runner)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "src")), check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "unrecognized arguments" not in done.stderr and " error" not in done.stdout.lower()
    assert re.search(r"tests/test_hostile_property\.py:\d+: needs hypothesis, not installed here", done.stdout), \
        done.stdout[-3000:]


@pytest.mark.slow
def test_on_this_cpu_the_device_steps_are_skipped_saying_why_and_it_ends_0():
    """The check's real run here, made once per test run (tests/cpu_check.py: the doctor table test reads its
    doctor rows); its doctor step reads the machine the env step detected (--env-file), not detected again."""
    done = cpu_check.on_this_machine()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    (folder,) = done.out.iterdir()
    data = summary(folder)
    if data["kind"] != "cpu":
        pytest.skip("this machine has an accelerator")
    steps = {s["name"]: s for s in data["steps"]}
    assert folder.name.startswith("cpu-") and steps["env"]["status"] == "ok" and data["within_budget"]
    assert steps["doctor"]["status"] == "ok" and "PASS" in steps["doctor"]["reason"]
    assert steps["doctor"]["commands"][0].endswith(f"--env-file {folder}/env.json"), steps["doctor"]["commands"]
    assert json.loads((folder / "doctor.json").read_text())[0]["check"] == "environment"
    for name in STEPS[2:]:
        assert steps[name]["status"] == "skipped" and "needs a GPU, TPU or Apple GPU" in steps[name]["reason"]


@pytest.mark.slow
def test_doctor_on_this_machine_prints_its_table_and_exits_0(detected_once, monkeypatch, capsys):
    """Every backend's every check on this machine PASS or WARN in the doctor's table, exit 0. On a CPU-only
    machine the rows are those the accelerator check's `xpubench doctor --json` step measured here (tests/
    cpu_check.py: the same diagnosis, its probes run once per test run), printed by this doctor command; where
    the check looked at an accelerator instead, the doctor measures here. (In this file, not test_doctor.py: the
    check's run is made by whichever test asks first, and under xdist a test of another file, in the other
    worker, waited for it: ~16 s of a worker idle in suite-s7.)"""
    from xpubench import cli, doctor
    from xpubench.doctor import checks
    from xpubench.doctor.checks import PASS, WARN

    for name in [k for k in os.environ if k.startswith(cpu_check.SILENT_FALLBACKS)]:
        monkeypatch.delenv(name)
    measured = cpu_check.cpu_doctor_rows()
    if measured is not None:
        monkeypatch.setattr(doctor, "diagnose", lambda env, **_: [checks.Row(**row) for row in measured])
    code = cli.main(["doctor"])
    stdout = capsys.readouterr().out
    assert code == 0, stdout
    cells = [[c.strip() for c in line.strip().strip("│").split("│")] for line in stdout.splitlines()
             if line.startswith("│")]
    for backend in ("numpy", "torch", "jax"):
        for check in doctor.CHECK_NAMES:
            assert any(row[:3] == [backend, "cpu", check] and row[3] in (PASS, WARN) for row in cells), (backend, check)
    assert stdout.rstrip().endswith("0 FAIL")


def test_jax_before_0_5_1_has_no_is_initialized_and_the_data_parallel_ending_still_works(monkeypatch):
    """The oldest jax the check supports is 0.5.0; ``jax.distributed.is_initialized`` came in 0.5.1
    (read in the released wheels), and a data-parallel case's ending (the device tests) called it."""
    jax = pytest.importorskip("jax")
    from xpubench.backends.jax_ import distributed

    monkeypatch.delattr(jax.distributed, "is_initialized")
    assert distributed.is_initialized() is False
    distributed.shutdown()          # no AttributeError: nothing to shut down


def test_an_apple_gpu_with_mlx_runs_mlx_lm_on_metal_in_the_llama_step():
    """Issue 50 item 3: where MLX sees the Apple GPU (its mps device), the llama step runs MLX-LM beside torch on
    it; an Apple machine without MLX, or MLX with the CPU only, runs torch alone as before."""
    env = machine("apple-m2")
    mps = next(d for d in env["backends"]["torch"]["devices"] if d["kind"] == "mps")

    def llama(env: dict) -> str:
        step = next(s for s in plan_mod.plan(env, "py") if s.name == "llama")
        return " ".join(step.build(60.0)[0].argv)

    assert "run -w llama -b torch -d mps" in llama(env)
    with_mlx = {**env, "backends": {**env["backends"], "mlx": {"installed": True, "devices": [mps]}}}
    assert "run -w llama -b torch,mlx -d mps" in llama(with_mlx)
    cpu_only = {**env, "backends": {**env["backends"], "mlx": {"installed": True, "devices": []}}}
    assert "run -w llama -b torch -d mps" in llama(cpu_only)
