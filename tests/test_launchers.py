"""The launchers (launch/launchers/): which one a run declares (local, hosts, srun) and from what, the line a
fleet's Slurm engine writes (srun_command), process 0's word to the others over the run's channel, and
process 0 deciding for every process (its budget, an OOM, a failure): the others start exactly the
workers it starts. The same runs under a real one-node Slurm: tests/test_srun.py."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

import pytest

from xpubench import envnames
from xpubench.backends.world import World, handed
from xpubench.case import Case
from xpubench.errors import UserError
from xpubench.launch import follower, launchers, runner
from xpubench.launch.budget import Budget
from xpubench.launch.launchers import channel, slurm
from xpubench.launch.launchers.hosts import Hosts

# what `srun -n 2` gives its task 1 (the names and values Slurm 22.05 set on this VM); an sbatch script has
# SLURM_NTASKS and SLURM_PROCID too, but no SLURM_STEP_*
STEP = {"SLURM_JOB_ID": "41", "SLURM_STEP_ID": "3", "SLURM_STEP_NODELIST": "node[007-008],gpu1",
        "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NUM_NODES": "2", "SLURM_NTASKS": "2", "SLURM_PROCID": "1",
        "SLURM_LOCALID": "0"}
BATCH = {"SLURM_JOB_ID": "41", "SLURM_NTASKS": "2", "SLURM_PROCID": "0", "SLURM_JOB_NODELIST": "node[007-008]"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_run_declares_one_launcher_from_its_flags_or_its_environment():
    local = launchers.declared(environ={})
    assert (local.name, local.world, local.leads) == ("local", World(), True)
    assert launchers.declared(num_processes="1", environ={}).name == "local"
    hosts = launchers.declared("h:1234", "2", "1", environ={})
    assert (hosts.name, hosts.world, hosts.leads) == ("hosts", World("h:1234", 2, 1), False)
    by_env = {envnames.COORDINATOR: "h:1234", envnames.NUM_PROCESSES: "2", envnames.PROCESS_ID: "0"}
    assert launchers.declared(environ=by_env).world == World("h:1234", 2, 0)
    srun = launchers.declared(environ=STEP)
    assert (srun.name, srun.world.num_processes, srun.world.process_id) == ("srun", 2, 1)
    assert srun.world.coordinator == f"node007:{slurm.port_of(STEP)}"
    assert launchers.declared("10.0.0.5:2000", "2", environ=STEP).world.coordinator == "10.0.0.5:2000"
    assert launchers.declared(environ=BATCH).name == "local"   # the sbatch script itself: no step, alone


@pytest.mark.parametrize("flags, environ, said", [
    (("h", "2", "0"), {}, "HOST:PORT"),
    (("h:99999", "2", "0"), {}, "HOST:PORT"),
    ((None, "0", None), {}, "at least 1"),
    (("h:1", "2", "2"), {}, "out of range"),
    (("h:1", None, None), {}, "need --num-processes"),
    ((None, "two", None), {}, "whole number"),
    ((None, "2", None), {}, "--num-processes 2 needs --coordinator HOST:PORT .* or start the processes with srun"),
    (("h:1", "2", None), {}, "needs --coordinator HOST:PORT .* and --process-id I"),
    ((None, "4", None), STEP, "--num-processes 4 but this srun step has 2 tasks"),
    ((None, None, "1"), STEP, "srun numbers its tasks"),
    ((None, None, None), {"TORCHELASTIC_RUN_ID": "x"}, "not under torchrun"),
])
def test_a_bad_setting_is_one_line(flags, environ, said):
    with pytest.raises(UserError, match=said):
        launchers.declared(*flags, environ=environ)


def test_slurm_host_lists_and_the_runs_port():
    assert slurm.first_host("vm") == "vm"
    assert slurm.first_host("node[007-015],gpu1") == "node007"
    assert slurm.first_host("node[001,007-015]") == "node001"
    assert slurm.first_host("a[1-2]-b[3,4],c") == "a1-b3"
    ports = {slurm.port_of({"SLURM_JOB_ID": str(job), "SLURM_STEP_ID": str(step)})
             for job in range(0, 5000, 7) for step in range(3)}
    assert min(ports) >= slurm.FIRST_PORT and max(ports) + 1 <= 65535 and all(p % 2 == 0 for p in ports)
    assert slurm.port_of(STEP) == slurm.port_of(dict(STEP, SLURM_PROCID="0"))   # every task the same
    assert slurm.port_of(STEP) != slurm.port_of(dict(STEP, SLURM_STEP_ID="4"))  # two steps of one job apart


def test_srun_command_is_the_line_a_fleet_machine_with_nodes_or_ntasks_runs():
    run = ["xpubench", "run", "-w", "mnist_cnn", "--devices", "16"]
    assert slurm.srun_command(run, nodes=2) == [
        "srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1", *run, "--num-processes", "2"]
    assert slurm.srun_command(run, ntasks=2) == ["srun", "--ntasks=2", "--kill-on-bad-exit=1", *run,
                                                 "--num-processes", "2"]
    assert slurm.srun_command(run, ntasks=4, nodes=2)[:4] == ["srun", "--nodes=2", "--ntasks=4", "--kill-on-bad-exit=1"]
    for bad, said in [({}, "needs nodes or ntasks"), ({"nodes": 3, "ntasks": 2}, "more than ntasks"),
                      ({"ntasks": 0}, "at least 1")]:
        with pytest.raises(UserError, match=said):
            slurm.srun_command(run, **bad)


def test_a_worker_is_handed_its_place_in_the_run():
    env = {envnames.COORDINATOR: "stale:1", envnames.NUM_PROCESSES: "9"}
    launchers.Launcher().worker_environment(env)
    assert env == {} and handed(env) == World()   # alone: nothing of a shell's settings reaches the worker
    world = World("h:1234", 2, 0, hosts=1)
    Hosts(world).worker_environment(env)
    assert handed(env) == world


def test_process_0_tells_the_others_each_order_then_how_the_run_ended():
    port = _free_port()
    lead = Hosts(World(f"127.0.0.1:{port}", 3, 0))
    heard: dict[int, list] = {}

    def other(process: int) -> None:
        them = Hosts(World(f"127.0.0.1:{port}", 3, process))
        heard[process] = [*them.orders(), them.ending]

    threads = [threading.Thread(target=other, args=(i,)) for i in (1, 2)]
    for t in threads:
        t.start()
    lead.tell({"case": {"k": 1}, "process": 0})
    assert lead.world.hosts == 1                       # every process on this machine: one host
    lead.tell({"case": {"k": 2}, "process": 0})
    lead.close({"code": 2, "error": "bad flag"})
    for t in threads:
        t.join(timeout=30)
    expected = [{"case": {"k": 1}, "process": 0}, {"case": {"k": 2}, "process": 0}, {"code": 2, "error": "bad flag"}]
    assert heard == {1: expected, 2: expected}


def test_a_process_0_that_never_comes_and_a_peer_that_never_joins_are_one_line(monkeypatch):
    port = _free_port()
    with pytest.raises(ConnectionError, match=f"process 0 did not open the run at 127.0.0.1:{port} within 0.5 s"):
        channel.join("127.0.0.1", port, 1, timeout_s=0.5)
    lead = channel.Lead(port, 2)
    try:
        with pytest.raises(ConnectionError, match=f"process\\(es\\) 1, 2 did not join the run at port {port}"):
            lead.accept(0.3)
    finally:
        lead.close()


def test_two_processes_claiming_one_id_are_refused():
    port = _free_port()
    lead = channel.Lead(port, 2)
    try:
        for _ in range(2):
            channel.join("127.0.0.1", port, 1, timeout_s=5)
        with pytest.raises(UserError, match="joined the run as process 1: the others are 1..2, each once"):
            lead.accept(5)
    finally:
        lead.close()


class Told(launchers.Launcher):
    """Process 0 of two, its word kept instead of sent."""

    name = "hosts"

    def __init__(self):
        super().__init__(World("127.0.0.1:1", 2, 0, hosts=2))
        self.told: list[dict] = []

    def tell(self, order: dict) -> None:
        self.told.append(order)


def test_process_0_decides_for_all_its_oom_and_failures_stop_every_process(monkeypatch):
    """Process 0's OOM at batch 8 skips batch 16, and its failed case runs no second process: the others,
    told each worker, start exactly those (before: every host ran the whole plan, nothing decided)."""
    def fake_run_one(case, **kwargs):
        return {"status": "oom" if case.batch_size == 8 else "ok", "metrics": {}}, 0.01

    monkeypatch.setattr(runner, "run_one", fake_run_one)
    cases = [Case(workload="mnist_cnn", backend="jax", device="gpu:0", mode="train", batch_size=b, devices=2)
             for b in (4, 8, 16)]
    with launchers.running(Told(), told=False) as told:
        runs = runner.run_cases(cases, None, fingerprint={}, processes=2)
    assert [(o["case"]["batch_size"], o["process"]) for o in told.told] == [(4, 0), (8, 0), (4, 1)]
    assert [(r.case["batch_size"], r.status) for r in runs] == [(4, "ok"), (8, "oom"), (16, "skipped"), (4, "ok")]


def test_a_multi_process_run_keeps_process_0s_budget_and_its_timeouts(monkeypatch):
    """The budget applies (before: off over several processes): a case it has no time for is skipped and
    no one is told; each order carries process 0's timeout, capped by the time left."""
    now = [0.0]

    def fake_run_one(case, *, timeout_s, **kwargs):
        now[0] += 40.0
        return {"status": "ok", "metrics": {}}, 40.0

    monkeypatch.setattr(runner, "run_one", fake_run_one)
    budget = Budget(100.0, estimate=lambda case: 40.0, clock=lambda: now[0])
    cases = [Case(workload="mnist_cnn", backend="jax", device="cpu", mode="train", batch_size=b, devices=2)
             for b in (4, 8, 16)]
    with launchers.running(Told(), told=False) as told:
        runs = runner.run_cases(cases, None, fingerprint={}, processes=1, timeout_s=300.0, budget=budget)
    assert [(o["case"]["batch_size"], o["timeout_s"]) for o in told.told] == [(4, 100.0), (8, 60.0)]
    assert [r.status for r in runs] == ["ok", "ok", "skipped"] and "budget" in runs[2].message


def test_another_process_runs_what_process_0_ran(tmp_path, monkeypatch):
    """A real process 0 (`xpubench run`, selftest cases, 2 worker processes each) and process 1 here: it
    is told each worker process 0 starts, and only those (the case that raised runs no second process),
    and it writes nothing; process 0's file holds each case once."""
    port = _free_port()
    out = tmp_path / "r.jsonl"
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("XPUBENCH_")}
    lead = subprocess.Popen(
        [sys.executable, "-m", "xpubench", "run", "--selftest", "ok,raise", "-b", "numpy", "--processes", "2",
         "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", "0", "-o", str(out),
         "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    ran: list[tuple[str, int]] = []
    monkeypatch.setattr(follower, "run_one", lambda case, **kw: ran.append(
        (case.options["behaviour"], kw["process"])) or ({"status": "ok"}, 0.0))
    try:
        with launchers.running(Hosts(World(f"127.0.0.1:{port}", 2, 1))) as me:
            ending = follower.follow(me)
        _, err = lead.communicate(timeout=120)
    finally:
        if lead.poll() is None:
            lead.kill()
    assert lead.returncode == 1, err        # the raise case failed: some cases did not finish ok
    assert ending == {"code": 0, "error": None}
    assert ran == [("ok", 0), ("raise", 0), ("ok", 1)]
    from xpubench.results.store import load_file

    runs = load_file(out).runs
    assert sorted((r.case["options"]["behaviour"], r.process, r.metrics.get("launcher")) for r in runs) == [
        ("ok", 0, "hosts"), ("ok", 1, "hosts"), ("raise", 0, "hosts")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl", "r.jsonl.plan.json"]


def test_another_process_says_process_0s_error_in_one_line(capsys):
    """Process 0 stopped on bad input: the others print its line and exit with its code (2)."""
    from xpubench import cli

    port = _free_port()
    lead = Hosts(World(f"127.0.0.1:{port}", 2, 0))
    closing = threading.Thread(target=lambda: lead.close({"code": 2, "error": "matmul runs on one device"}))
    closing.start()
    code = cli.main(["run", "-w", "mnist_cnn", "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2",
                     "--process-id", "1"])
    closing.join(timeout=30)
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines()[-1] == "xpubench: error: process 0: matmul runs on one device"
