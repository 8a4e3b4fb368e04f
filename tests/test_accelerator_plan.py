"""Planning for accelerator machines from their recorded environments (tests/data/machines): the
default sweep per device, backends that lack a device, unknown chips, `run --dry-run --env-file`."""

from __future__ import annotations

import copy
import json
import shlex

import pytest
from machine_facts import MACHINES

from xpubench.cli import main
from xpubench.errors import UserError
from xpubench.plan import PlanRequest, build_cases
from xpubench.plan.notes import plan_notes


def machine(name: str) -> dict:
    return json.loads((MACHINES / f"{name}.json").read_text())


def keys(cases) -> set[tuple]:
    return {(c.backend, c.device, c.workload, c.mode, c.precision) for c in cases}


def dry_run(argv: str, capsys) -> tuple[int, str, str]:
    code = main(shlex.split(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_gpu_without_a_backend_drops_numpy_and_plans_torch_and_jax_cuda_in_fp32_tf32_bf16():
    """Defect 1 (numpy refused -d gpu before anyone else was asked) and 14 (fp32-only accelerator
    sweeps at launch-latency batch sizes)."""
    cases = build_cases(PlanRequest(devices=["gpu"], quick=True, all_cases=True), machine("h100-sxm"))
    assert {c.backend for c in cases} == {"torch", "jax"} and {c.device for c in cases} == {"gpu:0"}
    for backend in ("torch", "jax"):
        models = [c for c in cases if c.backend == backend and c.mode == "train"]
        assert {c.precision for c in models} == {"fp32", "tf32", "bf16"}
        matmul = {c.precision for c in cases if c.backend == backend and c.mode == "matmul"}
        assert matmul == {"fp32", "tf32", "bf16", "fp16"}
    mnist = next(c for c in cases if c.workload == "mnist_cnn")
    assert mnist.batch_size == 1024                # the largest default batch, not the CPU's quick 256
    weather = next(c for c in cases if c.workload == "weather_gru")
    assert weather.batch_size == 256               # not 4


def test_the_same_for_the_tpu_the_mi300x_and_the_m2():
    tpu = build_cases(PlanRequest(devices=["tpu"], quick=True, all_cases=True), machine("tpu-v5e-8"))
    assert {c.backend for c in tpu} == {"jax"} and {c.device for c in tpu} == {"tpu:0"}
    assert {c.precision for c in tpu if c.mode == "train"} == {"fp32", "bf16"}      # no tf32 on a TPU
    amd = build_cases(PlanRequest(devices=["gpu"], quick=True, all_cases=True), machine("mi300x"))
    assert {c.backend for c in amd} == {"torch", "jax"}                              # defect 4: no crash
    assert "tf32" not in {c.precision for c in amd}                                  # NVIDIA-only format
    assert {c.precision for c in amd if c.mode == "train"} == {"fp32", "bf16"}
    mps = build_cases(PlanRequest(devices=["mps"], quick=True, all_cases=True), machine("apple-m2"))
    assert {c.backend for c in mps} == {"torch"} and {c.device for c in mps} == {"mps"}
    assert {c.precision for c in mps if c.mode == "matmul"} == {"fp32", "bf16", "fp16"}   # defect 15
    # no 16-bit training: bf16 is emulated on an M2 and this torch (2.4.1) has no GradScaler on MPS
    # (second round, defect 12: tests/test_accelerator_round2.py)
    assert {c.precision for c in mps if c.mode == "train"} == {"fp32"}


def test_a_device_nobody_has_is_refused_naming_what_each_backend_has():
    with pytest.raises(UserError, match=r"device 'gpu' is not available to any installed backend: numpy "
                                         r"\(found: cpu\); jax \(found: tpu:0.*cpu\)"):
        build_cases(PlanRequest(devices=["gpu"]), machine("tpu-v5e-8"))
    with pytest.raises(UserError, match="device 'gpu' is not available to numpy"):   # named backends must have it
        build_cases(PlanRequest(backends=["numpy", "jax"], devices=["gpu"]), machine("h100-sxm"))


def test_cpu_and_gpu_without_a_backend_keep_numpy_on_the_cpu():
    cases = build_cases(PlanRequest(devices=["cpu", "gpu"], workloads=["matmul"], quick=True), machine("h100-sxm"))
    assert {(c.backend, c.device) for c in cases} == {("numpy", "cpu"), ("torch", "cpu"), ("torch", "gpu:0"),
                                                      ("jax", "cpu"), ("jax", "gpu:0")}


@pytest.mark.parametrize("capability", ["gfx1100", "gfx90a:sramecc+:xnack-", "unknown", "", None, "9.x", 8.9])
def test_an_unknown_gfx_string_or_capability_plans_without_crashing(capability):
    env = machine("mi300x")
    for dev in env["backends"]["jax"]["devices"]:
        if dev["kind"] == "gpu":
            dev["compute_capability"] = capability
    cases = build_cases(PlanRequest(devices=["gpu"], backends=["jax"], quick=True), env)
    assert cases and "tf32" not in {c.precision for c in cases}


def test_an_unknown_device_name_plans_and_has_no_peak():
    env = machine("h100-sxm")
    for info in env["backends"].values():
        for dev in info["devices"]:
            if dev["kind"] == "gpu":
                dev.update(name="NVIDIA Graphics Device", chip=None, peak_flops=dict.fromkeys(dev["peak_flops"]))
    cases = build_cases(PlanRequest(devices=["gpu"], quick=True, all_cases=True), env)
    assert {c.precision for c in cases if c.mode == "train"} == {"fp32", "tf32", "bf16"}   # from the capability


def test_pre_ampere_nvidia_trains_fp16_not_bf16_and_has_no_tf32():
    env = machine("h100-sxm")
    for info in env["backends"].values():
        for dev in info["devices"]:
            if dev["kind"] == "gpu":
                dev.update(name="Tesla V100-SXM2-16GB", compute_capability="7.0")
    cases = build_cases(PlanRequest(devices=["gpu"], workloads=["mnist_cnn"], quick=True), env)
    assert {c.precision for c in cases} == {"fp32", "fp16"}


def test_silent_environment_variables_are_warned_about_for_the_devices_they_touch():
    env = machine("h100-sxm")
    request = PlanRequest(devices=["gpu"], workloads=["matmul"], quick=True)
    cases = build_cases(request, env)
    notes = plan_notes(request, env, cases, environ={"NVIDIA_TF32_OVERRIDE": "1", "OMP_NUM_THREADS": "4",
                                                           "PYTORCH_ENABLE_MPS_FALLBACK": "1"})
    assert len(notes) == 1 and notes[0].startswith("NVIDIA_TF32_OVERRIDE=1: ") and "TF32" in notes[0]
    m2 = machine("apple-m2")
    mps = build_cases(PlanRequest(devices=["mps"], workloads=["matmul"], quick=True), m2)
    assert any("PYTORCH_ENABLE_MPS_FALLBACK=1" in n
               for n in plan_notes(PlanRequest(), m2, mps, environ={"PYTORCH_ENABLE_MPS_FALLBACK": "1"}))


@pytest.mark.parametrize(("name", "device", "backends"), [
    ("h100-sxm", "gpu", {"torch", "jax"}), ("tpu-v5e-8", "tpu", {"jax"}), ("mi300x", "gpu", {"torch", "jax"}),
    ("apple-m2", "mps", {"torch"})])
def test_dry_run_with_an_env_file_lists_the_cases_and_an_estimate(name, device, backends, capsys, tmp_path,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = dry_run(f"run --dry-run --all -d {device} --env-file {MACHINES / name}.json", capsys)
    assert code == 0 and err == ""
    assert "nothing runs, nothing is written" in out and "estimated time: about" in out
    listed = {line.split("/")[1] for line in out.splitlines() if "/train/" in line or "/matmul/" in line}
    assert listed == backends                               # no numpy case
    assert list(tmp_path.iterdir()) == []                   # no results file, no plan file
    if name == "h100-sxm":
        for precision in ("/train/fp32/", "/train/tf32/", "/train/bf16/"):
            assert f"torch/gpu:0{precision}" in out and f"jax/gpu:0{precision}" in out


def test_dry_run_here_is_the_plan_a_run_would_execute(capsys, monkeypatch, tmp_path):
    """The default CPU sweep is unchanged: the dry run prints exactly the cases build_cases plans."""
    env = machine("h100-sxm")
    monkeypatch.setattr("xpubench.api._detect", lambda *_: env)
    code, out, _ = dry_run("run --dry-run -d cpu", capsys)
    planned = build_cases(PlanRequest(devices=["cpu"], quick=True), env)
    assert code == 0 and f"{len(planned)} case(s)" in out
    assert all(c.key in out for c in planned)


@pytest.mark.parametrize(("content", "says"), [
    (None, "no such file"), ("not json", "not JSON"), ("[1, 2]", "is not an environment record"),
    ('{"host": {}, "backends": {"jax": {"devices": []}}}', "has no \"installed\" flag"),
    ('{"host": {}, "backends": {"jax": {"installed": true, "devices": [{"id": "gpu:0"}]}}}',
     "needs an \"id\" and a \"kind\"")])
def test_a_bad_env_file_is_one_line_and_exit_2(content, says, tmp_path, capsys):
    path = tmp_path / "env.json"
    if content is not None:
        path.write_text(content)
    code, _, err = dry_run(f"run --dry-run --env-file {path}", capsys)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1


def test_env_file_without_dry_run_is_refused(capsys):
    code, _, err = dry_run(f"run -w matmul --env-file {MACHINES / 'h100-sxm.json'}", capsys)
    assert code == 2 and "use it with --dry-run" in err


def test_dry_run_estimates_cases_without_a_known_peak_apart():
    from xpubench.plan import estimate

    env = machine("tpu-v5e-8")
    cases = build_cases(PlanRequest(devices=["tpu"], workloads=["mnist_cnn"], quick=True), env)
    known = {c.precision: estimate.case_seconds(c, env)[1] for c in cases}
    assert known == {"fp32": False, "bf16": True}             # a TPU publishes no fp32 peak
    total, unknown = estimate.plan_seconds(cases, env)
    assert unknown == 1 and total > 0
    unknown_chip = copy.deepcopy(env)
    for dev in unknown_chip["backends"]["jax"]["devices"]:
        dev["peak_flops"] = dict.fromkeys(dev["peak_flops"])
    assert estimate.plan_seconds(cases, unknown_chip)[1] == 2
