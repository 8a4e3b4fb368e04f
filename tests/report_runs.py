"""Results files for the report and compare tests, made by real (small) runs once per test session.

- ``base_file()``: a run on this machine: matmul N=384 (numpy, torch, jax) and the MNIST CNN
  (torch at batch 32 and 64, jax at 32, 2 epochs of 3 steps; real MNIST test images when the shared data
  set is there, so the report has a misclassified-image gallery).
- ``recorded_pair()``, ``recorded_slow()``: results files of the same numpy matmul case recorded once
  (tests/data/compare/, measured on a 2-core AMD EPYC VM, not on the machine running the tests): two
  unchanged back-to-back runs and one run slowed on purpose (as slow_file()). Their samples are fixed,
  so a verdict drawn from them does not depend on how quiet this machine is.
- ``slow_file()``: the numpy matmul case again, made slower on purpose by a real handicap: its worker
  process is stopped for 30 ms of every 35 ms (about a seventh of the CPU time it would have had).
- ``quick_charts(monkeypatch)``: for tests about what a report holds or where its files go, not its pixels:
  every chart is still made from the results, but written as a tiny PNG (no layout, no drawing, labels not
  fitted to drawn text).
Each is made once per test run, by whichever of the run's processes (pytest-xdist's workers) asks first,
in conftest.session_dir() under conftest.session_lock: the others wait for it and read it. Shared by every
test module that imports this one.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import threading
import time
from pathlib import Path

from conftest import session_dir, session_lock, shared_dataset, this_machine
from quick_compile import QUICK_XLA

MNIST = shared_dataset("mnist")
MATMUL_N = 384
SLOW_CASE = f"matmul/numpy/cpu/matmul/fp32/n{MATMUL_N}"
# the `xpubench run` arguments the recorded files were made with (recorded_pair, tests/data/gate); slow_file() runs
# the same case through api.run
MATMUL_NUMPY = ("-w", "matmul", "-b", "numpy", "-p", "fp32", "--size", str(MATMUL_N), "--time-budget", "1")
BLAS_THREADS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@functools.cache
def folder() -> Path:
    path = session_dir() / "report-runs"
    path.mkdir(exist_ok=True)
    return path


def made_once(name: str, make) -> Path:
    """folder()/name, made by ``make(path)`` (which returns it finished) unless another process of this test
    run made it: only a finished file is renamed into place, so a failed make leaves none behind."""
    out = folder() / name
    with session_lock(name):
        if not out.exists():
            partial = make(folder() / f"partial-{os.getpid()}-{name}")
            partial.replace(out)
    return out


def real_data() -> bool:
    return (MNIST / "t10k-images-idx3-ubyte.gz").exists()


def _all_ok(out: Path) -> Path:
    bad = [line for line in out.read_text().splitlines() if '"status": "ok"' not in line]
    assert not bad, bad
    return out


@functools.cache
def base_file() -> Path:
    return made_once("base.jsonl", _make_base)


def _make_base(out: Path) -> Path:
    """Two in-process api.run calls (this machine's environment detected once per test run, as every test
    that records runs reads it: no detection subprocess importing torch and JAX again), their records
    joined: the JAX CNN at batch 32 only, as one JAX batch size is all a report test reads (torch's two
    make the batch-size chart and table), its programs compiled quickly (quick_xla)."""
    from xpubench import api

    data = {"data": "real", "data_dir": str(MNIST)} if real_data() else {}
    common = {"workloads": ["matmul", "mnist_cnn"], "precisions": ["fp32"], "sizes": [MATMUL_N], "epochs": 2,
              "steps": 3, "train_samples": 384, "eval_samples": 256, "time_budget_s": 1, "processes": 1,
              "environment": this_machine(), **data}
    parts = [out.with_name(f"{out.name}.{i}") for i in range(2)]
    with one_blas_thread():
        api.run(output=parts[0], backends=["numpy", "torch"], batch_sizes=[32, 64], **common)
        with quick_xla():
            api.run(output=parts[1], backends=["jax"], batch_sizes=[32], **common)
    out.write_text("".join(part.read_text() for part in parts))
    return _all_ok(out)


def one_blas_thread():
    """Single-threaded BLAS in the worker processes started inside (a loaded 2-core machine makes two BLAS
    threads erratic: every file here is measured the same way, so only slow_file()'s deliberate handicap
    differs)."""
    return worker_environment(BLAS_THREADS)


def quick_xla():
    """The JAX workers started inside compile at XLA's backend level 0 (tests/quick_compile.py): the report
    tests read what a run records, not how fast JAX runs (the flag is recorded with the run's environment)."""
    return worker_environment({"XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {QUICK_XLA}".strip()})


@contextlib.contextmanager
def worker_environment(values: dict[str, str]):
    """``values`` in this process's environment (so in the worker processes started inside), then as before."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name)
            else:
                os.environ[name] = value


def _workers_of(parent: int) -> list[int]:
    """Worker processes of the `xpubench run` process ``parent`` (they carry its pid in their environment)."""
    mark = f"XPUBENCH_PARENT_PID={parent}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and mark in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def _signal(pids: list[int], sig) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


RECORDED = Path(__file__).resolve().parent / "data" / "compare"


def recorded_pair() -> tuple[Path, Path]:
    """The numpy matmul case (`xpubench run` MATMUL_NUMPY), run twice back to back and kept as recorded:
    warm medians 1.279 and 1.250 ms, each with 7 windows (the same command as slow_file() without the
    handicap). Two measurements of an unchanged case, whose verdict can't change with this machine's noise."""
    return RECORDED / "first.jsonl", RECORDED / "second.jsonl"


def recorded_slow() -> Path:
    """The same case recorded while its worker was stopped 30 ms of every 35 ms (slow_file()): 7.3x slower."""
    return RECORDED / "slow.jsonl"


@functools.cache
def slow_file() -> Path:
    """The numpy matmul case of base_file(), measured while its worker is stopped (SIGSTOP) for 30 ms of
    every 35 ms, as cpulimit does: it gets about a seventh of the CPU time it would have had (less
    slowdown when the machine is loaded and the throttle wakes late; still several times slower)."""
    return made_once("slow.jsonl", _make_slow)


def _make_slow(out: Path) -> Path:
    """An in-process api.run of the case (this machine's environment detected once per test run, as
    _make_base: no `xpubench run` process and no detection child), its worker throttled from a thread."""
    from xpubench import api

    done = threading.Event()
    throttle = threading.Thread(target=_throttle, args=(os.getpid(), done), daemon=True)
    with one_blas_thread():
        throttle.start()
        try:
            api.run(output=out, workloads=["matmul"], backends=["numpy"], precisions=["fp32"], sizes=[MATMUL_N],
                    time_budget_s=1, processes=1, environment=this_machine())
        finally:
            done.set()
            throttle.join()
    return _all_ok(out)


def _throttle(parent: int, done: threading.Event) -> None:
    """Until ``done``: the worker processes of ``parent`` stopped for 30 ms of every 35 ms."""
    workers: list[int] = []
    try:
        cycle = 0
        while not done.is_set():
            if cycle % 5 == 0:
                workers = _workers_of(parent)
            _signal(workers, signal.SIGSTOP)
            time.sleep(0.030)
            _signal(workers, signal.SIGCONT)
            time.sleep(0.005)
            cycle += 1
    finally:
        _signal(_workers_of(parent) + workers, signal.SIGCONT)


def rewritten(path: Path, name: str, change) -> Path:
    """A copy whose every record went through ``change(record) -> record | None`` (None drops it)."""
    lines = []
    for line in Path(path).read_text().splitlines():
        record = change(json.loads(line))
        if record is not None:
            lines.append(json.dumps(record))
    target = folder() / f"rewritten-{os.getpid()}" / name   # this process's: another may write the same name
    target.parent.mkdir(exist_ok=True)
    target.write_text("\n".join(lines) + "\n")
    return target


def quick_charts(monkeypatch) -> None:
    """Every chart's figure is made (its data, title, caption and name as a report has them) but saved as a
    tiny PNG carrying the Software chunk report/charts/performance.py asks for, without matplotlib's text
    layout and drawing (~0.3-1 s of CPU a chart): for tests that read a report's sections, tables, ids or
    files, not its pixels."""
    from matplotlib.figure import Figure

    def savefig(self, fh, **kw):
        text = b"Software\x00" + kw.get("metadata", {}).get("Software", "matplotlib").encode()
        fh.write(b"\x89PNG\r\n\x1a\n" + len(text).to_bytes(4, "big") + b"tEXt" + text + b"\0\0\0\0")

    monkeypatch.setattr(Figure, "savefig", savefig)
    monkeypatch.setattr(Figure, "tight_layout", lambda self, *a, **kw: None)
    monkeypatch.setattr(Figure, "draw_without_rendering", lambda self: None)   # labels fitted to undrawn text


def report_command_built(argv: list[str]):
    """Runs `xpubench ``argv``` (a report command, which must end 0) and returns the Report it built and wrote:
    another format is rendered from it without drawing its charts again."""
    import pytest

    from xpubench.cli import main
    from xpubench.report.render import build

    build_report = build.build_report
    built = []

    def build_and_keep(*args, **kwargs):
        built.append(build_report(*args, **kwargs))
        return built[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(build, "build_report", build_and_keep)
        assert main(argv) == 0
    [report] = built
    return report
