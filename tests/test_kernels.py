"""Issue 21: the CPU kernels that decided a number are recorded (devices/kernels.py), `xpubench doctor`
warns when a library runs below what the CPU can do (naming the variable and what it costs here), and the
report's environment table and `compare` show it. The library information is faked (threadpoolctl's
output as it prints it on this VM with and without OPENBLAS_CORETYPE=Haswell), so the verdicts do not
depend on the machine running the tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from xpubench import doctor
from xpubench.devices import kernels
from xpubench.doctor import kernels as kernel_check
from xpubench.doctor.checks import PASS, WARN
from xpubench.report.tables.environment import LIKELY_CAUSE, differences, summarize_fingerprint

AVX512 = ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni"]
AVX2 = ["sse4_2", "avx", "avx2", "fma"]


def threadpool_info(architecture: str) -> list[dict]:
    """threadpoolctl.threadpool_info() on the project's VM (numpy's OpenBLAS, torch's OpenMP)."""
    return [{"user_api": "openmp", "internal_api": "openmp", "num_threads": 2, "prefix": "libgomp",
             "filepath": "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/lib/libgomp.so.1",
             "version": None},
            {"user_api": "blas", "internal_api": "openblas", "num_threads": 2, "prefix": "libscipy_openblas",
             "filepath": "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/numpy.libs/"
                         "libscipy_openblas64_-32a4b2a6.so",
             "version": "0.3.31.188.0", "threading_layer": "pthreads", "architecture": architecture}]


def record(architecture: str, capability: str = "AVX512") -> dict:
    return {"libraries": kernels.libraries(threadpool_info(architecture)),
            "torch": {"cpu_capability": capability, "blas": "mkl", "mkl": "2024.2", "onednn": "3.12.0", "threads": 2},
            "xla": {"max_isa": None}}


def fake_rate(calls: list):
    """A matmul 'measured' at 100 GFLOP/s with OPENBLAS_CORETYPE set and 200 without."""
    def rate(backend, precision, environ):
        calls.append((backend, precision, environ.get("OPENBLAS_CORETYPE")))
        return 100e9 if environ.get("OPENBLAS_CORETYPE") else 200e9
    return rate


def env_record(architecture: str, flags=AVX512) -> dict:
    return {"host": {"cpu": {"flags": flags}}, "backends": {}, "kernels": record(architecture)}


def test_a_haswell_kernel_on_an_avx512_cpu_warns_with_the_variable_and_its_measured_cost():
    calls: list = []
    environ = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "512"}
    row = kernel_check.diagnose(env_record("Haswell"), environ, fake_rate(calls))
    assert row.status == WARN and row.check == "kernels"
    assert "OpenBLAS 0.3.31.188.0 (numpy) runs its Haswell kernel (AVX2) on this AVX-512 CPU" in row.reason
    assert "because OPENBLAS_CORETYPE=Haswell is set" in row.reason
    assert "100.0 GFLOP/s with it, 200.0 GFLOP/s without it (2.00x faster without it)" in row.reason
    assert calls == [("numpy", "fp32", "Haswell"), ("numpy", "fp32", None)]   # with, then without the variable


def test_the_cpus_own_kernel_is_quiet_and_measures_nothing():
    calls: list = []
    row = kernel_check.diagnose(env_record("SkylakeX"), {}, fake_rate(calls))
    assert row.status == PASS and "no library runs below this CPU's AVX-512" in row.reason
    assert "SkylakeX kernel" in row.reason and "ATen AVX512" in row.reason
    assert calls == []
    assert kernel_check.diagnose(env_record("Haswell", flags=AVX2), {}, fake_rate(calls)).status == PASS
    assert calls == []       # Haswell is an AVX2 CPU's own level


def test_a_library_that_picked_an_old_kernel_itself_warns_without_a_variable_to_blame():
    row = kernel_check.diagnose(env_record("Zen"), {}, fake_rate([]))
    assert row.status == WARN and "chosen by the library itself" in row.reason and "newer release" in row.reason


def test_caps_set_by_variables_are_findings_with_the_backend_and_precision_that_show_them():
    environ = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
               "XLA_FLAGS": "--xla_force_host_platform_device_count=2 --xla_cpu_max_isa=AVX2",
               "MKL_ENABLE_INSTRUCTIONS": "AVX512"}       # MKL's cap is the CPU's level: no finding
    found = kernels.findings(record("SkylakeX", capability="AVX2"), AVX512, environ)
    assert [(f.library.split()[0], f.variable, f.backend) for f in found] == [
        ("PyTorch's", "ATEN_CPU_CAPABILITY=avx2", "torch"), ("oneDNN", "ONEDNN_MAX_CPU_ISA=AVX2", "torch"),
        ("XLA", "--xla_cpu_max_isa=AVX2 in XLA_FLAGS", "jax")]
    assert kernel_check.precision_of(found[1]) == "bf16"
    assert kernel_check.without(found[2], environ)["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"
    assert "ONEDNN_MAX_CPU_ISA" not in kernel_check.without(found[1], environ)


def test_the_record_keeps_no_file_path_and_says_which_package_loaded_each_library():
    libs = kernels.libraries(threadpool_info("Haswell"))
    assert [lib["used_by"] for lib in libs] == ["torch", "numpy"]
    assert "/root" not in json.dumps(libs) and libs[1]["architecture"] == "Haswell"


def test_the_doctor_adds_the_kernels_row_only_where_detection_recorded_kernels():
    numpy = {"installed": True, "version": "2.4.6", "devices": [{"id": "cpu", "kind": "cpu", "name": "AMD EPYC"}]}
    env = {**env_record("Haswell"), "backends": {"numpy": numpy}}
    rows = doctor.diagnose(env, backends=["numpy"], devices=["cpu"], environ={"OPENBLAS_CORETYPE": "Haswell"},
                           probe=lambda cfg: {"errors": {"setup": "not measured in this test"}},
                           kernel_rate=fake_rate([]))
    assert [(r.check, r.status) for r in rows[:2]] == [("environment", WARN), ("kernels", WARN)]
    assert kernel_check.diagnose({"host": {}, "backends": {}}, {}) is None     # an older record: no row


def fingerprint(architecture: str, environ: dict) -> dict:
    return {"host": {"cpu": {"model": "AMD EPYC", "flags": AVX512}}, "env": environ, "kernels": record(architecture)}


def test_the_environment_table_shows_the_kernel_and_that_it_is_below_the_cpu():
    table = summarize_fingerprint(fingerprint("Haswell", {"OPENBLAS_CORETYPE": "Haswell"}))
    assert table["OPENBLAS_CORETYPE"] == "Haswell"
    assert table["numpy BLAS kernel"] == "openblas 0.3.31.188.0, Haswell kernel, 2 threads"
    assert "because OPENBLAS_CORETYPE=Haswell is set" in table["kernels below the CPU"]
    assert table["torch CPU kernels"].startswith("ATen AVX512, BLAS mkl, MKL 2024.2, oneDNN 3.12.0")
    quiet = summarize_fingerprint(fingerprint("SkylakeX", {}))
    assert "kernels below the CPU" not in quiet and quiet["numpy BLAS kernel"].endswith("SkylakeX kernel, 2 threads")


def test_compare_puts_kernel_differences_first_as_a_likely_cause():
    a = {**fingerprint("Haswell", {"OPENBLAS_CORETYPE": "Haswell"}), "python": "3.11.7"}
    b = {**fingerprint("SkylakeX", {}), "python": "3.12.1"}
    lines = differences(a, b)
    kernel_lines = [line for line in lines if LIKELY_CAUSE in line]
    assert lines[:len(kernel_lines)] == kernel_lines and len(kernel_lines) == 3
    assert any(line.startswith("numpy BLAS kernel: openblas 0.3.31.188.0, Haswell kernel") for line in kernel_lines)
    assert any(line.startswith("OPENBLAS_CORETYPE: Haswell (A) vs unset (B)") for line in kernel_lines)
    assert any(line.startswith("kernels below the CPU:") and "vs none (B)" in line for line in kernel_lines)
    assert "python: 3.11.7 (A) vs 3.12.1 (B)" in lines and LIKELY_CAUSE not in lines[-1]


@pytest.mark.slow
def test_env_json_records_the_variable_and_openblas_kernel_it_picked_here():
    """The real threadpoolctl on this machine: OPENBLAS_CORETYPE=Haswell is recorded with the kernel it picks."""
    env = dict(os.environ, OPENBLAS_CORETYPE="Haswell", OPENBLAS_L2_SIZE="512")
    out = subprocess.run([sys.executable, "-m", "xpubench", "env", "--json"], capture_output=True, text=True,
                         timeout=300, env=env, check=True).stdout
    record = json.loads(out)
    assert record["variables"]["OPENBLAS_CORETYPE"] == "Haswell" and record["variables"]["OPENBLAS_L2_SIZE"] == "512"
    numpy_blas = [lib for lib in record["kernels"]["libraries"] if lib["used_by"] == "numpy"]
    assert numpy_blas and numpy_blas[0]["architecture"] == "Haswell"
    assert record["kernels"]["torch"]["cpu_capability"]


def test_a_run_on_the_cpu_says_before_it_starts_that_a_kernel_is_below_the_cpu():
    from xpubench.case import Case
    from xpubench.plan import PlanRequest
    from xpubench.plan.notes import plan_notes

    numpy_case = Case(workload="matmul", backend="numpy", device="cpu", mode="matmul", size=1024)
    torch_case = Case(workload="matmul", backend="torch", device="cpu", mode="matmul", size=1024)
    env = env_record("Haswell")
    request = PlanRequest(workloads=["matmul"], precisions=["fp32"])
    notes = plan_notes(request, env, [numpy_case], {"OPENBLAS_CORETYPE": "Haswell"})
    assert any("Haswell kernel (AVX2)" in n and "OPENBLAS_CORETYPE=Haswell" in n for n in notes)
    assert not plan_notes(request, env, [torch_case], {"OPENBLAS_CORETYPE": "Haswell"})


def test_env_prints_the_kernels_and_warns_about_one_below_the_cpu():
    from rich.console import Console

    from xpubench.devices.render import render_environment

    env = {**env_record("Haswell"), "variables": {"OPENBLAS_CORETYPE": "Haswell"}}
    console = Console(record=True, width=300)
    render_environment(env, console)
    text = console.export_text()
    assert "CPU kernels numpy BLAS kernel: openblas 0.3.31.188.0, Haswell kernel, 2 threads" in text
    assert "warning: OpenBLAS 0.3.31.188.0 (numpy) runs its Haswell kernel (AVX2)" in text
