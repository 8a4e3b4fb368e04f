"""Several processes (hosts) on loopback: two `xpubench run` processes form one data-parallel group,
with torchrun's engine (c10d rendezvous) for PyTorch and jax.distributed for JAX, process 0 writing the
case once; and the plans of a multi-process run. (The launchers' settings and process 0's word to the
others: tests/test_launchers.py; the same under srun: tests/test_srun.py.)"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from conftest import this_machine
from quick_compile import QUICK_XLA
from worker_processes import SERVER_NAME, descendants, is_worker, process_table, workers_below

from xpubench.backends.world import World
from xpubench.errors import UserError
from xpubench.launch import launchers
from xpubench.plan import PlanRequest, build_cases
from xpubench.results.store import load_file


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# `xpubench run` in a process of its own (the hosts, the kill), planning for the machine detected once per test
# run (conftest.this_machine, saved in a file) instead of starting a detection child (~3 CPU s, torch and JAX
# imported) per host: these tests are about the processes of a run, not about detection.
XPUBENCH_RUN = ("import json, sys; import xpubench.api as api; env = json.load(open(sys.argv[1])); "
                "api.detect_environment = lambda **_: env; from xpubench import cli; sys.exit(cli.main(sys.argv[2:]))")


def xpubench_run(tmp_path) -> list[str]:
    """A command line running `xpubench run` as `python -m xpubench run` does, with the saved environment."""
    saved = tmp_path / "environment.json"
    if not saved.exists():
        saved.write_text(json.dumps(this_machine()))
    return [sys.executable, "-c", XPUBENCH_RUN, str(saved), "run"]


def _two_processes(tmp_path, backend: str, extra_env: dict | None = None):
    """The case as process 0 wrote it (process 1 writes nothing: its -o is not made)."""
    port = _free_port()
    procs, outs = [], []
    for pid in (0, 1):
        out = tmp_path / f"{backend}-{pid}.jsonl"
        outs.append(out)
        env = {k: v for k, v in os.environ.items() if not k.startswith("XPUBENCH_")}
        procs.append(subprocess.Popen(
            [*xpubench_run(tmp_path), "--processes", "1", "-w", "mnist_cnn", "-b", backend,
             "--devices", "2", "--batch-size", "16", "--steps", "2", "--epochs", "2", "--train-samples", "64",
             "--eval-samples", "48",
             "--timeout", "300", "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(pid),
             "-o", str(out), "--no-progress"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**env, **(extra_env or {})}))
    try:
        for p in procs:
            _, err = p.communicate(timeout=400)
            assert p.returncode == 0, err[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert not outs[1].exists()
    (result,) = load_file(outs[0]).results
    return result


@pytest.mark.slow
def test_torch_ddp_across_two_processes_on_loopback(tmp_path, one_thread_workers):
    pytest.importorskip("torch")
    r = _two_processes(tmp_path, "torch")
    assert r.status == "ok", r.message
    m = r.metrics   # one group of 2 ranks, on one machine
    assert (m["hosts"], m["world_size"], m["global_batch"], m["ddp_backend"], m["launcher"]) == (1, 2, 32, "gloo",
                                                                                                  "hosts")


@pytest.mark.slow
def test_jax_distributed_across_two_processes_on_loopback(tmp_path, one_thread_workers):
    pytest.importorskip("jax")
    r = _two_processes(tmp_path, "jax", {"XLA_FLAGS": QUICK_XLA})   # what is recorded, not its speed
    assert r.status == "ok", r.message
    m = r.metrics
    assert (m["hosts"], m["world_size"], m["devices"], m["global_batch"]) == (1, 2, 2, 32)
    assert r.placement.endswith("(2 devices)")


def _env_with(backend: str, devices: int) -> dict:
    return {"host": {"cpu": {}}, "backends": {backend: {"installed": True, "devices": [
        {"id": "cpu" if i == 0 else f"cpu:{i}", "kind": "cpu"} for i in range(devices)]}}}


def test_multi_process_plans():
    env = _env_with("jax", 4)
    with launchers.running(launchers.Hosts(World("127.0.0.1:1234", 2, 0)), told=False):
        cases = build_cases(PlanRequest(workloads=["mnist_cnn"], backends=["jax"], batch_sizes=[16]), env)
        assert [c.devices for c in cases] == [8]                      # default: every device of both processes
        cases = build_cases(PlanRequest(workloads=["mnist_cnn"], backends=["jax"], batch_sizes=[16], scaling=True),
                            env)
        assert [c.devices for c in cases] == [2, 4, 8]
        with pytest.raises(UserError, match="does not split evenly"):
            build_cases(PlanRequest(workloads=["mnist_cnn"], backends=["jax"], device_counts=[3]), env)
        with pytest.raises(UserError, match="matmul runs on one device"):
            build_cases(PlanRequest(workloads=["matmul"], backends=["jax"]), env)


def test_too_many_jax_cpu_devices_names_the_xla_flag():
    with pytest.raises(UserError, match="xla_force_host_platform_device_count"):
        build_cases(PlanRequest(workloads=["mnist_cnn"], backends=["jax"], device_counts=[8]), _env_with("jax", 1))


# ---- no rank outlives its case: the worker's ranks are in its process group ----

def _wait_for_ranks(pid: int, ranks: int = 2, limit_s: float = 180, before=frozenset(),
                    servers: bool = True) -> dict[int, bytes]:
    """The processes under ``pid`` once the worker and ``ranks`` rank processes exist, less ``before``
    (under this test process: an earlier test may have left a multiprocessing resource tracker, which
    lives as long as the process and is not the case's), and less fork servers unless ``servers`` (they
    outlive a case in the process that runs it, but not that process)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        below = descendants(pid)
        workers = [p for p, (cmd, name) in below.items() if is_worker(cmd, name)]
        spawned = [p for p, (cmd, _) in below.items() if b"spawn_main" in cmd]
        if workers and len(spawned) >= ranks:
            time.sleep(1)  # let the ranks get going (rendezvous)
            return {p: cmd for p, (cmd, name) in descendants(pid).items()   # a fork server outlives a case,
                    if p not in before and (servers or name != SERVER_NAME)}   # not its runner
        time.sleep(0.1)
    raise AssertionError(f"no worker with {ranks} ranks under {pid} after {limit_s:g} s: {descendants(pid)}")


def _still_running(pids, limit_s: float = 30) -> list[int]:
    """The pids still alive (not gone, not a zombie) after up to ``limit_s`` seconds (a bound on liveness,
    not a timing claim: multiprocessing's resource tracker leaves only once it reads the end of its pipe,
    which on a loaded 2-core machine took more than 5 s)."""
    deadline = time.monotonic() + limit_s
    while True:
        table = process_table()
        alive = [p for p in pids if p in table and table[p][1] != "Z"]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


DDP_CASE = ["-w", "mnist_cnn", "-b", "torch", "--devices", "2", "--batch-size", "8", "--steps", "100000",
            "--epochs", "1000", "--train-samples", "64", "--eval-samples", "16", "--compile", "off"]


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc (Linux)")
def test_killed_xpubench_run_leaves_no_rank_behind(tmp_path):
    pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items() if not k.startswith("XPUBENCH_")}
    run = subprocess.Popen([*xpubench_run(tmp_path), "--processes", "1", *DDP_CASE, "--timeout", "300",
                            "-o", str(tmp_path / "killed.jsonl"), "--no-progress"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        below = _wait_for_ranks(run.pid)
        run.kill()  # SIGKILL: no cleanup in xpubench run itself
        run.wait(timeout=10)
        assert _still_running(below) == [], {p: below[p] for p in _still_running(below, 0)}
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert not (tmp_path / "killed.jsonl").exists() or (tmp_path / "killed.jsonl").read_text() == ""


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc (Linux)")
def test_killed_worker_leaves_no_rank_behind(tmp_path):
    pytest.importorskip("torch")
    from xpubench.case import Case
    from xpubench.launch.supervise import run_one

    case = Case(workload="mnist_cnn", backend="torch", device="cpu", mode="train", batch_size=8, devices=2,
                steps=100000, epochs=1000, train_samples=64, eval_samples=16, compile="off")
    done: dict = {}
    runner = threading.Thread(target=lambda: done.update(outcome=run_one(case, timeout_s=120)[0]))
    already = frozenset(descendants(os.getpid()))
    runner.start()
    below: dict = {}
    try:
        below = _wait_for_ranks(os.getpid(), before=already, servers=False)
        (worker,) = workers_below(os.getpid())
        os.kill(worker, signal.SIGKILL)
        runner.join(timeout=30)
        assert not runner.is_alive(), "run_one did not return after its worker was killed"
        assert done["outcome"]["status"] == "oom", done  # SIGKILL reads as the kernel's OOM killer
        assert _still_running(below, limit_s=30) == [], {p: below[p] for p in _still_running(below, 0)}
    finally:
        for pid in _still_running(below, 0):  # only after a failure: never leave them running
            os.kill(pid, signal.SIGKILL)
        runner.join(timeout=30)
