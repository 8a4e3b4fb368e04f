"""Workers forked from a server that imported the framework once (launch/forkserver.py): still one fresh
process per case, killed at its timeout, ended with the runner or the server; spawned where asked."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from worker_processes import descendants, is_worker, process_table, servers_below, workers_below

from xpubench.case import Case
from xpubench.launch import forkserver, supervise

pytestmark = pytest.mark.skipif(forkserver.method(False, {}) != "forkserver",
                                reason="fork servers need Linux with pidfds (5.3+)")


def selftest(behaviour, **opts) -> Case:
    return Case(workload="selftest", backend="numpy", device="cpu", mode="train", batch_size=1,
                options={"behaviour": behaviour, **opts})


def test_the_method_is_spawn_where_asked_and_for_accelerators_by_default():
    assert forkserver.method(False, {}) == "forkserver"
    assert forkserver.method(False, {"XPUBENCH_LAUNCH": "spawn"}) == "spawn"
    assert forkserver.method(True, {}) == "spawn"
    assert forkserver.method(True, {"XPUBENCH_LAUNCH": "forkserver"}) == "forkserver"


def test_where_fork_servers_cannot_run_workers_spawn_and_asking_for_one_is_an_error(monkeypatch):
    from xpubench.errors import UserError

    monkeypatch.setattr(forkserver, "_can_fork_serve", lambda: False)   # macOS, Windows, Linux before 5.3
    assert forkserver.method(False, {}) == "spawn"
    with pytest.raises(UserError, match="XPUBENCH_LAUNCH=forkserver needs Linux 5.3 or later"):
        forkserver.method(False, {"XPUBENCH_LAUNCH": "forkserver"})


def _watch_workers(seen: dict, stop: threading.Event) -> None:
    """worker pid -> (its parent, the set of fork servers then) of every worker below this process."""
    while not stop.is_set():
        table = process_table()
        below = descendants(os.getpid(), table)
        for pid in [p for p, (cmdline, name) in below.items() if is_worker(cmdline, name)]:
            if pid not in seen:
                try:
                    cwd = os.readlink(f"/proc/{pid}/cwd")
                except OSError:
                    continue
                seen[pid] = (table[pid][0], frozenset(p for p, (_, n) in below.items() if n == "xpubench-forks"),
                             cwd)
        time.sleep(0.02)


def _run_watched(cases_and_env: list[tuple[Case, dict, int]], monkeypatch, tmp_path):
    seen: dict = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_workers, args=(seen, stop))
    watcher.start()
    outcomes = []
    try:
        for case, env, process in cases_and_env:
            for name, value in env.items():
                monkeypatch.setenv(name, value)
            outcomes.append(supervise.run_one(case, timeout_s=30, workdir=tmp_path, process=process)[0])
    finally:
        stop.set()
        watcher.join()
    return outcomes, seen


@pytest.mark.slow
def test_each_case_is_a_fresh_child_of_the_server_for_its_environment_and_process(monkeypatch, tmp_path):
    monkeypatch.delenv("XPUBENCH_LAUNCH", raising=False)
    here = tmp_path / "runner's folder"
    here.mkdir()
    monkeypatch.chdir(here)
    sleep = selftest("sleep", seconds=0.5)
    outcomes, seen = _run_watched([(sleep, {"XPUBENCH_TEST_MARK": "a"}, 0), (sleep, {"XPUBENCH_TEST_MARK": "a"}, 0),
                                   (sleep, {"XPUBENCH_TEST_MARK": "b"}, 0), (sleep, {"XPUBENCH_TEST_MARK": "b"}, 1)],
                                  monkeypatch, tmp_path)
    assert [(o["status"], o["metrics"]["launch"]) for o in outcomes] == [("ok", "forkserver")] * 4
    workers = sorted(seen)   # pids grow: the order they were forked in
    assert len(workers) == 4, seen   # a process of its own per case
    parents = [seen[w][0] for w in workers]
    assert parents[0] == parents[1], parents   # the same environment and process: the same server
    assert len({parents[1], parents[2], parents[3]}) == 3, parents   # another environment, another process
    assert all(parent in seen[w][1] for w, parent in zip(workers, parents))   # each a fork server's child
    assert {seen[w][2] for w in workers} == {str(here)}   # in the runner's folder, not the server's
    assert not set(workers) & set(workers_below(os.getpid()))   # all ended
    assert set(parents) <= set(servers_below(os.getpid()))     # the servers wait for the next case


@pytest.mark.slow
def test_a_timed_out_worker_is_killed_and_its_server_serves_the_next_case(monkeypatch, tmp_path):
    monkeypatch.delenv("XPUBENCH_LAUNCH", raising=False)
    monkeypatch.setenv("XPUBENCH_TEST_MARK", "timeout")
    started = time.monotonic()
    hung, _ = supervise.run_one(selftest("hang"), timeout_s=2, workdir=tmp_path)
    assert hung["status"] == "timeout" and hung["metrics"]["launch"] == "forkserver", hung
    assert time.monotonic() - started < 15
    assert workers_below(os.getpid()) == []
    after, _ = supervise.run_one(selftest("ok"), timeout_s=30, workdir=tmp_path)
    assert after["status"] == "ok" and after["metrics"].pop("case_s") >= 0   # the worker's time inside its case
    assert after["metrics"] == {"behaviour": "ok", "value": 1.0, "launch": "forkserver"}


@pytest.mark.slow
def test_a_server_that_dies_under_a_case_is_its_error_and_its_worker_ends(monkeypatch, tmp_path):
    monkeypatch.delenv("XPUBENCH_LAUNCH", raising=False)
    monkeypatch.setenv("XPUBENCH_TEST_MARK", "server-dies")
    done: dict = {}
    running = threading.Thread(target=lambda: done.update(outcome=supervise.run_one(
        selftest("hang"), timeout_s=60, workdir=tmp_path)[0]))
    before = set(servers_below(os.getpid()))
    running.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (workers_below(os.getpid())
                                                   and set(servers_below(os.getpid())) - before):
            time.sleep(0.05)
        (worker,) = workers_below(os.getpid())
        (server,) = set(servers_below(os.getpid())) - before
        os.kill(server, signal.SIGKILL)
        running.join(timeout=20)
        assert not running.is_alive(), "run_one did not return when its server died"
        assert done["outcome"]["status"] == "error", done
        assert "the fork server ended" in done["outcome"]["message"]
        deadline = time.monotonic() + 10   # the worker sees its parent gone (worker.watch_parent: 0.5 s)
        while time.monotonic() < deadline and Path(f"/proc/{worker}").exists() and \
                Path(f"/proc/{worker}/stat").read_text().split()[2] != "Z":
            time.sleep(0.1)
        assert not Path(f"/proc/{worker}").exists() or Path(f"/proc/{worker}/stat").read_text().split()[2] == "Z"
    finally:
        for pid in [*workers_below(os.getpid()), *([worker] if "worker" in locals() else [])]:
            with contextlib.suppress(ProcessLookupError):   # an orphan is no longer below this process
                os.kill(pid, signal.SIGKILL)
        running.join(timeout=30)
    again, _ = supervise.run_one(selftest("ok"), timeout_s=30, workdir=tmp_path)   # a new server
    assert again["status"] == "ok", again


def test_an_unknown_method_is_one_line_and_exit_2_before_anything_runs(monkeypatch, tmp_path, capsys):
    from xpubench import cli
    from xpubench.errors import UserError

    with pytest.raises(UserError, match="XPUBENCH_LAUNCH='fork': use spawn or forkserver"):
        forkserver.method(False, {"XPUBENCH_LAUNCH": "fork"})
    monkeypatch.setenv("XPUBENCH_LAUNCH", "fork")
    out = tmp_path / "r.jsonl"
    code = cli.main(["run", "-w", "selftest", "--selftest", "ok", "-o", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().splitlines() == [
        "xpubench: error: XPUBENCH_LAUNCH='fork': use spawn or forkserver (or leave it unset)"], err
    assert not out.exists()


@pytest.mark.slow
def test_a_server_whose_imports_outlast_the_timeout_is_the_cases_timeout(monkeypatch, tmp_path):
    from xpubench import backends

    (tmp_path / "slow_to_import.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv("XPUBENCH_LAUNCH", raising=False)
    monkeypatch.setattr(backends.get("numpy"), "preload", ("slow_to_import",))
    before = set(servers_below(os.getpid()))
    started = time.monotonic()
    outcome, wall = supervise.run_one(selftest("ok"), timeout_s=3, workdir=tmp_path)
    assert outcome == {"status": "timeout", "message": "no result after 3 s: killed",
                       "metrics": {"launch": "forkserver"}}
    assert 3 <= wall < 10 and time.monotonic() - started < 10
    deadline = time.monotonic() + 10   # the server was ended, not left importing
    while time.monotonic() < deadline and set(servers_below(os.getpid())) - before:
        time.sleep(0.1)
    assert not set(servers_below(os.getpid())) - before


@pytest.mark.slow
def test_an_idle_server_exits_on_its_own_and_at_once_when_the_runner_is_gone():
    import subprocess
    import sys

    code = ("import sys, xpubench.launch.forkserver_process as f; f.IDLE_EXIT_S = float(sys.argv[3]); "
            "f.serve(int(sys.argv[1]), int(sys.argv[2]), [])")
    for idle_s, close_requests in ((0.3, False), (60.0, True)):
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        server = subprocess.Popen([sys.executable, "-c", code, str(requests_r), str(replies_w), str(idle_s)],
                                  pass_fds=(requests_r, replies_w))
        os.close(requests_r)
        os.close(replies_w)
        if close_requests:
            os.close(requests_w)   # what the runner's exit does
        assert server.wait(timeout=20) == 0
        for fd in (replies_r, *(() if close_requests else (requests_w,))):
            os.close(fd)


@pytest.mark.slow
def test_a_runner_interrupted_while_its_server_imports_ends_that_server(monkeypatch, tmp_path):
    monkeypatch.delenv("XPUBENCH_LAUNCH", raising=False)
    monkeypatch.setenv("XPUBENCH_TEST_MARK", "interrupted")

    def interrupted(self, timeout):
        raise KeyboardInterrupt   # Ctrl-C in the runner while the new server still imports

    monkeypatch.setattr(forkserver.ForkServer, "_reply", interrupted)
    before = set(servers_below(os.getpid()))
    with pytest.raises(KeyboardInterrupt):
        supervise.run_one(selftest("ok"), timeout_s=30, workdir=tmp_path)
    assert not set(servers_below(os.getpid())) - before   # ended and reaped: it forks no case afterwards
    assert workers_below(os.getpid()) == []


def test_a_spawned_worker_imports_what_a_forked_one_finds_imported(monkeypatch):
    import sys

    from xpubench import backends
    from xpubench.launch.worker import import_preload

    monkeypatch.setattr(backends.get("numpy"), "preload", ("colorsys", "no_such_module_for_xpubench"))
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    import_preload("numpy")          # a module that fails is the case's to meet
    assert "colorsys" in sys.modules
    import_preload("a-backend-nobody-has")   # a user's model planned as auto: nothing
