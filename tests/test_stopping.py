"""Stopping is clean (issue 52 item 4; docs/robustness.md, "Stopping"): Ctrl-C, SIGTERM and SIGHUP to
`xpubench run`, `serve` (a real llama-server) and `site` each end the command with exit code 128 + the
signal, keep what it had finished, and leave no process of its own behind -- the workers and fork servers,
llama-server, the site's pool; a serve killed outright (SIGKILL) takes its llama-server along too. A
serve point cut in its warm-up says it was interrupted (against an in-process fake server).

Each command runs as a real process in a session of its own, with a mark in its environment that every
process it starts inherits, so one reparented to init (the orphan of issue 52) is found as well. SIGINT
and SIGHUP go to the command's process group, as a terminal sends Ctrl-C and a hang-up; SIGTERM to the
process alone, as ``kill`` and a batch scheduler send it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import test_serve_llamacpp
from test_distributed import xpubench_run
from worker_processes import is_worker

from xpubench.results import store

MARK = "XPUBENCH_TEST_STOP_MARK"
DATA = Path(__file__).resolve().parent / "data"
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
tiny_gguf = test_serve_llamacpp.tiny_gguf   # the fixture: a tiny GGUF to serve (skipped where llama.cpp is not built)


def ours(token: str) -> dict[int, str]:
    """pid -> name (a worker's: "xpubench-worker", spawned or forked) of every live process whose environment
    holds the mark (a zombie's environment is empty)."""
    found, needle = {}, f"{MARK}={token}".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as fh:
                if needle not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry.name}/comm") as fh:
                name = fh.read().strip()
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                found[int(entry.name)] = "xpubench-worker" if is_worker(fh.read(), name) else name
        except OSError:
            continue
    return found


def wait_for(condition, what: str, timeout_s: float = 120.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{what}: not within {timeout_s:g} s")


class Command:
    """``python -m xpubench ARGV`` in a session of its own, marked; a run plans for the machine detected once
    per test run (test_distributed.xpubench_run: its detection child is gone long before the stop)."""

    def __init__(self, argv: list[str], cwd: Path):
        self.token, self.temp = uuid.uuid4().hex, cwd / "temp"   # its temporary files (llama-server's log)
        self.temp.mkdir(exist_ok=True)
        env = dict(os.environ, **{MARK: self.token}, PYTHONUNBUFFERED="1", TMPDIR=str(self.temp))
        env.pop("COLUMNS", None)
        command = [*xpubench_run(cwd), *argv[1:]] if argv[0] == "run" else [sys.executable, "-m", "xpubench", *argv]
        self.proc = subprocess.Popen(command, cwd=cwd, env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)

    def children(self) -> dict[int, str]:
        return {pid: name for pid, name in ours(self.token).items() if pid != self.proc.pid}

    def alive(self) -> bool:
        if self.proc.poll() is not None:
            out, err = self.proc.communicate()
            raise AssertionError(f"the command ended early ({self.proc.returncode}): {out.decode()} {err.decode()}")
        return True

    def stop(self, sig: int) -> tuple[int, str]:
        """Send ``sig`` (module docstring), then (exit code, stderr); every process of ours must be gone."""
        if sig in (signal.SIGINT, signal.SIGHUP):
            os.killpg(self.proc.pid, sig)
        else:
            os.kill(self.proc.pid, sig)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        # a fork server or a worker notices its runner's end within 0.5 s
        wait_for(lambda: not ours(self.token), f"no process of the command left ({ours(self.token)} are)", 20)
        return self.proc.returncode, err.decode()

    def kill_leftovers(self) -> None:
        for pid in ours(self.token):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def command(tmp_path):
    made: list[Command] = []

    def start(argv: list[str]) -> Command:
        made.append(Command(argv, tmp_path))
        return made[-1]

    yield start
    for c in made:   # a failed test leaves nothing running either
        c.kill_leftovers()


@pytest.mark.slow   # starts xpubench and its worker processes (a few seconds)
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_run_stops_its_workers_and_fork_servers_and_keeps_the_finished_cases(command, tmp_path, sig):
    out = tmp_path / "r.jsonl"
    run = command(["run", "--selftest", "ok,hang", "-b", "numpy", "--processes", "1", "--timeout", "300",
                   "--no-progress", "-o", str(out)])
    wait_for(lambda: run.alive() and out.is_file() and out.read_text().count("\n") == 1, "the first case recorded")
    wait_for(lambda: run.alive() and "xpubench-worker" in run.children().values(), "the hanging case's worker")
    code, err = run.stop(sig)
    name = "Ctrl-C" if sig == signal.SIGINT else signal.Signals(sig).name
    assert code == 128 + sig, err
    assert f"xpubench: interrupted ({name}); finished cases are in the results file (use --resume)" in err
    [kept] = store.load_file(out).runs
    assert kept.status == "ok" and kept.case["options"]["behaviour"] == "ok"


def _served(serve: Command) -> int:
    """The completions llama-server has ended so far (a line of its log each)."""
    return sum(log.read_text(errors="replace").count("stop processing")
               for log in serve.temp.glob("xpubench-server-*.log"))


def _serve(command, gguf: Path, out: Path):
    """A closed-loop point of 3 requests, then an open-loop one at 0.1 request/s: its first request goes at
    once, the next ~19 s later (seed 0); the fourth completion in llama-server's log is that first one, so
    the signal lands while the second point runs."""
    serve = command(["serve", "--server", "llamacpp", "--weights", str(gguf), "-c", "1", "--rate", "0.1",
                     "--input-len", "8", "--output-len", "8", "--requests", "3", "--warmup", "0", "--threads", "1",
                     "-o", str(out)])
    wait_for(lambda: serve.alive() and "llama-server" in serve.children().values(), "llama-server started")
    wait_for(lambda: serve.alive() and _served(serve) >= 4, "the second point's first request")
    assert out.read_text().count("\n") == 1     # the first point is in the file
    return serve


@pytest.mark.slow   # starts xpubench and its worker processes (a few seconds)
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_serve_stops_its_llama_server_and_keeps_the_finished_points(command, tiny_gguf, tmp_path, sig):
    out = tmp_path / "s.jsonl"
    serve = _serve(command, tiny_gguf, out)
    code, err = serve.stop(sig)
    name = "Ctrl-C" if sig == signal.SIGINT else signal.Signals(sig).name
    assert code == 128 + sig, err
    first, cut = store.load_file(out).runs
    assert first.status == "ok" and first.metrics["completed"] == 3 and not first.metrics.get("interrupted")
    # the cut point: its first request measured (or, were the signal faster than its last bytes, in flight)
    assert cut.metrics["request_rate"] == 0.1 and cut.metrics["interrupted"] is True
    assert cut.metrics.get("failed", 0) == 0      # no request the stop cancelled counts as a failure
    assert f"interrupted ({name})" in f"{cut.message} {cut.metrics['warning']}"


@pytest.mark.slow   # starts xpubench and its worker processes (a few seconds)
def test_serve_killed_outright_takes_its_llama_server_along(command, tiny_gguf, tmp_path):
    out = tmp_path / "s.jsonl"
    serve = _serve(command, tiny_gguf, out)
    os.kill(serve.proc.pid, signal.SIGKILL)     # no handler runs: the kernel ends llama-server (PR_SET_PDEATHSIG)
    serve.proc.wait(timeout=30)
    wait_for(lambda: not ours(serve.token), "llama-server gone with its parent", 20)


@pytest.mark.slow   # starts xpubench and its worker processes (a few seconds)
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_site_stops_its_readers(command, tmp_path, sig):
    results, site = tmp_path / "results", tmp_path / "site"
    results.mkdir()
    lines = (DATA / "runs" / "default-zen3.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    for i in range(200):   # files of different content: each is read (the cache is by digest)
        first["duration_s"] = i / 1000
        (results / f"r{i:03}.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    build = command(["site", str(results), "-o", str(site), "-j", "2"])
    wait_for(lambda: build.alive() and len(build.children()) >= 2, "the readers' pool")
    code, err = build.stop(sig)
    name = "Ctrl-C" if sig == signal.SIGINT else signal.Signals(sig).name
    assert code == 128 + sig, err
    assert err.strip().splitlines()[-1] == f"xpubench: interrupted ({name})", err   # one line, no traceback
    assert not (site / "index.html").exists()


@pytest.fixture
def signals_here():
    """This process's handlers of Ctrl-C, SIGTERM and SIGHUP, put back after the test; only the main thread
    can set them (a test runner's worker thread: skipped, as a signal would end the runner)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are set in the main thread only, and this test runs in another")
    from xpubench import errors

    earlier = {s: signal.getsignal(s) for s in SIGNALS}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    errors._echo_until[0] = 0.0   # an earlier test's stop, sent again and taken, leaves 50 ms that drop a new one
    yield
    for s, handler in earlier.items():
        signal.signal(s, handler)


@pytest.fixture
def stops_here(signals_here):
    """This process takes Ctrl-C, SIGTERM and SIGHUP as xpubench's main does (errors.stops_like_ctrl_c)."""
    from xpubench.errors import stops_like_ctrl_c

    with stops_like_ctrl_c():
        yield


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: signal.Signals(s).name)
def test_a_point_cut_in_its_warm_up_says_interrupted(stops_here, tmp_path, sig):
    """Issue 52 item 4: it said "no request completed: none was sent". The stop reaches the command, which
    passes it to the point's worker (launch/runner.py): the worker records why its point has no figures, the
    next point never starts, and the command exits 128 + the signal."""
    import threading

    from test_serve_faults import Fake, QuietServer

    from xpubench.cli import main
    from xpubench.serve.server import free_port

    class StopsAtTheSecond(Fake):
        def do_POST(self) -> None:
            StopsAtTheSecond.seen += 1
            if StopsAtTheSecond.seen == 2:   # a warm-up request (the first asked for /tokenize)
                os.kill(os.getpid(), sig)
            self.path = "/slow" + self.path   # its tokens 50 ms apart: the stop reaches the worker meanwhile
            super().do_POST()

    StopsAtTheSecond.seen = 0
    server = QuietServer(("127.0.0.1", free_port()), StopsAtTheSecond)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out = tmp_path / "serve.jsonl"
    try:
        code = main(["serve", "--url", f"http://127.0.0.1:{server.server_address[1]}", "-c", "1,2", "--input-len",
                     "4", "--output-len", "4", "--requests", "4", "--warmup", "3", "-o", str(out)])
    finally:
        server.shutdown()
        server.server_close()
    assert code == 128 + sig
    name = "Ctrl-C" if sig == signal.SIGINT else "SIGTERM"
    [cut] = store.load_file(out).runs
    assert cut.status == "error" and cut.metrics["interrupted"] is True and cut.case["users"] == 1
    assert cut.message == f"interrupted ({name}) in the warm-up before any measured request completed"


def test_each_stop_raises_where_the_command_is_and_a_hang_up_started_ignored_stays_ignored(signals_here):
    """``nohup xpubench run ...`` must survive its terminal: a signal the process started ignoring is not
    taken over. Ctrl-C and SIGTERM raise Interrupted with their signal (the exit code's), each time; leaving
    puts the earlier handlers back."""
    from xpubench.errors import Interrupted, stop_signal, stops_like_ctrl_c

    signal.signal(signal.SIGHUP, signal.SIG_IGN)                      # as nohup starts it
    earlier = signal.getsignal(signal.SIGTERM)
    with stops_like_ctrl_c():
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGTERM):
            with pytest.raises(Interrupted) as caught:
                signal.raise_signal(sig)
                time.sleep(5)                                         # the handler raises before this ends
            assert stop_signal(caught.value) == sig
    assert signal.getsignal(signal.SIGTERM) == earlier and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


def test_a_step_that_holds_the_stops_runs_whole_and_the_stop_comes_after(stops_here):
    """Stopping a child (llama-server's SIGTERM and wait, a worker's group killed and waited for) is not cut
    half-way by a second stop: it waits for the step's end (errors.stops_held)."""
    from xpubench.errors import Interrupted, stop_signal, stops_held

    done = []
    with pytest.raises(Interrupted) as caught, stops_held():
        signal.raise_signal(signal.SIGHUP)
        time.sleep(0.2)
        done.append("the whole step")
    assert done == ["the whole step"] and stop_signal(caught.value) == signal.SIGHUP


def _stop_here() -> None:
    """SIGTERM, taken by Python at once, inside the function that calls this."""
    signal.raise_signal(signal.SIGTERM)
    for _ in range(100):
        pass


def _in_a_gc_callback() -> None:
    import gc

    def callback(phase, info):
        if phase == "start":
            _stop_here()

    gc.callbacks.append(callback)
    try:
        gc.collect()
    finally:
        gc.callbacks.remove(callback)


def _in_a_weakref_callback() -> None:
    import weakref

    class Thing:
        pass

    thing = Thing()
    ref = weakref.ref(thing, lambda ref: _stop_here())   # noqa: F841 -- kept, so its callback runs
    del thing


def _in_a_finaliser() -> None:
    class Thing:
        def __del__(self):
            _stop_here()

    Thing()


def _in_a_generator_closed_by_the_collector() -> None:
    import gc

    def lines(cycle: list):
        try:
            yield 1
        finally:
            _stop_here()

    cycle: list = []
    cycle.append(lines(cycle))   # only the collector closes it
    next(cycle[0])
    del cycle
    gc.collect()


@pytest.mark.parametrize("drops", [_in_a_gc_callback, _in_a_weakref_callback, _in_a_finaliser,
                                   _in_a_generator_closed_by_the_collector], ids=lambda f: f.__name__[4:])
def test_a_stop_that_lands_where_python_drops_exceptions_is_not_lost(signals_here, monkeypatch, drops):
    """Seen with JAX imported (its callback runs at every collection): a SIGTERM taken inside the callback
    was printed as "Exception ignored" and dropped, and `serve` went on to the end; a weakref callback run
    by a long session's collection lost one the same way (tests/test_stopping.py in one process after the
    serve and site tests). It is sent again and raised outside, at once, even where the command waits in a
    system call; nothing is printed."""
    from xpubench.errors import Interrupted, stops_like_ctrl_c

    printed = []
    monkeypatch.setattr(sys, "unraisablehook", printed.append)
    started = time.monotonic()
    with stops_like_ctrl_c(), pytest.raises(Interrupted):
        drops()
        time.sleep(20)           # ... raised here, outside, waking this wait (a worker's, a server's)
    assert time.monotonic() - started < 10 and printed == []


def test_a_stop_sent_again_that_lands_in_the_unraisable_hook_is_not_lost(signals_here, monkeypatch):
    """On a busy machine the main thread was still in the unraisable hook, starting the thread that sends
    the stop again, when the first send came: taken there, it was dropped as well, and the sending ended."""
    import threading

    from xpubench.errors import Interrupted, stops_like_ctrl_c

    start = threading.Thread.start

    def slow_to_return(thread) -> None:   # the main thread is still in the hook when the first send comes
        start(thread)
        time.sleep(0.2)

    monkeypatch.setattr(threading.Thread, "start", slow_to_return)
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: None)
    started = time.monotonic()
    with stops_like_ctrl_c(), pytest.raises(Interrupted):
        _in_a_weakref_callback()
        time.sleep(20)
    assert time.monotonic() - started < 10
