"""Shared test settings and fixtures.

- Tests marked ``gpu``, ``tpu`` or ``mps`` run only where such a device exists (docs/accelerators.md):
  detection runs once, in a child process (so pytest itself never initialises CUDA or takes the TPU),
  and only when such tests are still selected after ``-m``.
- Plain pytest is enough (a compute node's site install): the suite is shuffled (pytest-random-order)
  with a 600 s limit per test (pytest-timeout) and, when no test path is given (the whole suite, or
  ``-m "not slow"``), run by XDIST_WORKERS worker processes (pytest-xdist; ``-n 0`` runs it in one) only
  where those plugins are installed, and a test module that imports an optional package that is absent
  (a framework, the test extra's hypothesis or transformers) is skipped saying which, instead of
  stopping the collection.
- Collection is made cheaper where it can be: pytest's rewritten test modules are cached even where
  PYTHONDONTWRITEBYTECODE is set, and under xdist this process detects the machine while the workers start;
  the garbage collector leaves what collection made alone (``pytest_collection``), and a worker whose tests
  are done leaves without the slow part of a normal exit (``end_worker``).
- Every test is order- and process-safe: its files in tmp_path, ports asked of the kernel, caches under
  a monkeypatched XDG_CACHE_HOME. What a whole run makes once (a real run's results file, this machine's
  detected devices) lies in ``session_dir()``, one folder for the run's processes (the xdist workers
  and plain pytest alike), each file made by whichever process asks first, under ``session_lock``.
- ``slow`` (registered in pyproject.toml) marks every test that trains a model or starts worker
  processes: ``python -m pytest -m "not slow"`` is the quick loop.
- The small real datasets: ``SHARED_DATASETS`` (``shared/datasets`` beside the checkout, the first such
  folder above tests/) and ``shared_dataset(name)``; the fixtures ``shared_datasets`` and ``mnist_dir``
  skip a test where they are absent.
- ``one_thread_workers``: worker processes started by the test run one CPU thread per kernel library.
- ``detected_once``: in-process runs read this machine's environment detected once per test run (no
  detection child per run), for tests that are not about detection.
- ``no_timing_history`` (every test): runs neither read nor write the user's timing history.
- The results files the report and compare tests read (real small runs, made once per session by
  tests/report_runs.py): the fixtures ``report_base_file`` and ``report_slow_file`` (both slow to make).
- ``slurm``: the run's one-node Slurm on 127.0.0.1 (tests/slurm_cluster.py), started once for the test
  processes that ask, stopped when the last leaves (and by ``pytest_unconfigure`` if one crashed); skipped
  with the reason where Debian's slurm-wlm and munge are absent. ``SLURM_CONF`` is set for the test.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gc
import json
import os
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path

import pytest

# pytest keeps its assertion-rewritten test modules in tests/__pycache__ only where Python may write bytecode: a
# PYTHONDONTWRITEBYTECODE=1 image (common in containers) made every process of every run rewrite all ~100 test
# modules again (~4 CPU s of a ~15 s collection). The suite's own caches, in this checkout, git-ignored.
sys.dont_write_bytecode = False

DEVICE_MARKS = ("gpu", "tpu", "mps")
_OWN_SESSION_DIR = pytest.StashKey[Path]()
_DETECTING = pytest.StashKey[threading.Thread]()
DETECTION_FAILED = "detection_failed"
TEST_TIMEOUT_S = 600   # per test, where pytest-timeout is installed
XDIST_WORKERS = 2      # worker processes for the whole suite, where pytest-xdist is installed (2 cores in CI)
SESSION_DIR = "XPUBENCH_TEST_SESSION_DIR"   # environment variable: the run's shared folder (session_dir)
OPTIONAL_PACKAGES = ("torch", "jax", "jaxlib", "flax", "optax", "keras", "tensorflow", "hypothesis", "transformers",
                     "httpx", "gguf")
_TESTS = Path(__file__).resolve().parent
SHARED_DATASETS = next((p / "shared" / "datasets" for p in _TESTS.parents if (p / "shared" / "datasets").is_dir()),
                       _TESTS.parents[1] / "shared" / "datasets")   # repo_root.parent / shared where absent


def shared_dataset(name: str) -> Path:
    """A dataset's folder in SHARED_DATASETS (it may not exist: check before use, or use the fixtures)."""
    return SHARED_DATASETS / name


def session_dir() -> Path:
    """The folder this test run's processes share (made by pytest_configure in the first process, removed
    when it ends); a private one where a test module is imported outside pytest."""
    if SESSION_DIR not in os.environ:
        os.environ[SESSION_DIR] = tempfile.mkdtemp(prefix="xpubench-tests-")
    return Path(os.environ[SESSION_DIR])


@contextlib.contextmanager
def session_lock(name: str):
    """Held by one process of the run at a time: the first to ask makes the shared file ``name``, the
    others wait and then read it."""
    with open(session_dir() / f"{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    if not SHARED_DATASETS.is_dir():
        pytest.skip(f"{SHARED_DATASETS} is not beside the checkout")
    return SHARED_DATASETS


@pytest.fixture(scope="session")
def mnist_dir(shared_datasets) -> Path:
    path = shared_datasets / "mnist"
    if not (path / "t10k-images-idx3-ubyte.gz").exists():
        pytest.skip(f"{path} holds no MNIST files")
    return path


@pytest.fixture
def one_thread_workers(monkeypatch) -> None:
    """One CPU thread per kernel library in the worker processes the test starts (as tests/report_runs.py
    runs): two OpenMP threads on the 2 shared cores stall when other processes compete (a torch GRU
    training case took 60-156 s with two threads against 10-12 s with one, at load ~5). For tests about
    what a run records, not how fast it runs."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.setenv(name, "1")


@pytest.fixture(scope="session")
def slurm_session():
    import slurm_cluster

    with slurm_cluster.cluster() as cluster:
        yield cluster


@pytest.fixture
def slurm(slurm_session, monkeypatch):
    """The one-node Slurm (tests/slurm_cluster.py), ``SLURM_CONF`` pointing at it for the test and its children."""
    for name, value in slurm_session.environ().items():
        monkeypatch.setenv(name, value)
    return slurm_session


@pytest.fixture(scope="session")
def report_base_file() -> Path:
    """A real small run's results file (tests/report_runs.py base_file)."""
    import report_runs

    return report_runs.base_file()


@pytest.fixture(scope="session")
def report_slow_file() -> Path:
    """The numpy matmul case made slower on purpose (tests/report_runs.py slow_file)."""
    import report_runs

    return report_runs.slow_file()


@functools.cache
def machine_environment() -> dict:
    """This machine's ``xpubench env --json`` record (only DETECTION_FAILED, saying why, when detection
    fails), detected once per test run (the xdist workers read the first one's)."""
    from xpubench.backends.fingerprint import detect_environment

    saved = session_dir() / "environment.json"
    with session_lock(saved.name):
        if saved.exists():
            return json.loads(saved.read_text())
        try:   # TEST_TIMEOUT_S, not detection's 120 s: at load ~30 on 2 cores it took longer, and every test
            env = detect_environment(timeout_s=TEST_TIMEOUT_S)   # asking for this machine then failed in setup
        except Exception as exc:  # noqa: BLE001 - no environment: every device test skips
            env = {DETECTION_FAILED: str(exc)}
        saved.write_text(json.dumps(env))
        return env


def this_machine() -> dict:
    """machine_environment() for a test that records runs with it: fails saying why where detection failed."""
    env = machine_environment()
    assert DETECTION_FAILED not in env, env[DETECTION_FAILED]
    return env


@pytest.fixture
def detected_once(monkeypatch) -> dict:
    """In-process runs (``api.run``, ``api.plan``, ``cli.main(["run", ...])``) read this_machine(), detected once per
    test run, instead of starting detection's child process each time (backends/detect.py: even ``-b numpy``
    imports JAX to measure the CPU clock, ~2-3 s of CPU; ~5 s with torch). For tests about what a run does, not
    about detection: the run records this machine's environment as detection gives it (every backend's, as
    where a run detects every backend), the fingerprint, packages and kernels the same."""
    env = this_machine()
    monkeypatch.setattr("xpubench.api.detect_environment", lambda **_: env)
    return env


@pytest.fixture(autouse=True)
def no_timing_history(monkeypatch) -> None:
    """No test's run learns from or writes to the user's timing history (launch/history.py): a run in one
    test would change another's estimates. The tests of the history give each run a file of its own."""
    monkeypatch.setenv("XPUBENCH_HISTORY", "off")


def device_kinds(env: dict, backend: str | None = None) -> set[str]:
    return {d["kind"] for name, info in env.get("backends", {}).items() if backend in (None, name)
            for d in info.get("devices", [])}


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """The whole suite (no test path given: pyproject's testpaths) runs in XDIST_WORKERS processes where
    pytest-xdist is installed; ``-n N`` overrides (``-n 0``: one process). A file or a test named on the
    command line runs in this process, without the workers' start-up. Not in pyproject's addopts: without
    the plugin pytest would refuse ``-n``."""
    if (config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput")
            and config.getoption("numprocesses", default=None) is None
            and config.args_source == pytest.Config.ArgsSource.TESTPATHS):
        config.option.numprocesses = XDIST_WORKERS
        if config.option.dist == "no":
            # a module's tests share one process's module fixtures (built models) and compiled code. Against
            # worksteal, from suite-s3's per-test times (2 workers, 200 shuffled orders): 1253 s against 1242 s
            # median, so splitting modules would gain ~1% and build each module fixture in both workers
            config.option.dist = "loadfile"


def detect_early(config) -> None:
    """Where xdist's workers run the suite, this (controlling) process detects the machine while they start and
    collect (~15 s each), so the workers' device-mark check and first this_machine() read the saved record
    instead of waiting ~5 s for a detection child; joined before the session folder is removed."""
    if not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
        thread = threading.Thread(target=machine_environment, name="detect-early", daemon=True)
        thread.start()
        config.stash[_DETECTING] = thread


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """The test extra's plugins, where installed: a shuffled order (pytest-random-order; off with
    ``-p no:random_order`` or ``--random-order-bucket=none``) and TEST_TIMEOUT_S per test (pytest-timeout;
    ``--timeout`` overrides). Not in pyproject's addopts: without the plugins pytest would refuse them.
    The first process of the run makes session_dir() (xdist's workers inherit it through the environment),
    and xdist's workers see the terminal size variables as that process did (they start with COLUMNS=80
    set: a CLI test's rich tables would fold at 80 columns instead of being printed wide, as when piped)."""
    if SESSION_DIR not in os.environ:
        config.stash[_OWN_SESSION_DIR] = session_dir()
    terminal = session_dir() / "terminal.json"
    if not hasattr(config, "workerinput") and not terminal.exists():
        terminal.write_text(json.dumps({name: os.environ.get(name) for name in ("COLUMNS", "LINES")}))
    elif hasattr(config, "workerinput"):
        for name, value in json.loads(terminal.read_text()).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    if config.pluginmanager.hasplugin("random_order"):
        config.option.random_order_enabled = True
    if config.pluginmanager.hasplugin("timeout") and config.getoption("timeout", default=None) is None:
        config.option.timeout = TEST_TIMEOUT_S
    detect_early(config)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """The first process removes session_dir(); an xdist worker then ends at once (end_worker)."""
    detecting = config.stash.get(_DETECTING, None)
    if detecting is not None:
        detecting.join(timeout=TEST_TIMEOUT_S)
    own = config.stash.get(_OWN_SESSION_DIR, None)
    if own is not None:
        import slurm_cluster

        slurm_cluster.stop_left(own)   # a test process that crashed left its Slurm running
        shutil.rmtree(own, ignore_errors=True)
        os.environ.pop(SESSION_DIR, None)
    if hasattr(config, "workerinput"):
        end_worker(config)


def end_worker(config) -> None:
    """An xdist worker has sent its last result (workerfinished, at its session's end) and every plugin has
    unconfigured: it runs the exit functions a normal exit runs (atexit: multiprocessing's children, temporary
    folders, lock files) and leaves without the rest of a normal exit, which cost each worker ~3-4 s of CPU
    after its last test while the controller waited (quick loop: ~7 s of its ~60 s wall): pytest's five full
    garbage collections at config cleanup (torch, JAX and ~4000 modules are alive; what they would find,
    an exception raised in a __del__, can no longer reach the controller's report) and the interpreter's
    teardown of every module."""
    import atexit

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(config.workeroutput.get("exitstatus", 0)))


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A test module that cannot be imported because an optional package (OPTIONAL_PACKAGES) is not
    installed is skipped with that reason; any other import error stays an error."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and isinstance(collector, pytest.Module):
        text = str(report.longrepr)
        missing = re.search(r"No module named '([\w.]+)'", text)
        if missing and missing.group(1).split(".")[0] in OPTIONAL_PACKAGES:
            line = re.search(rf"{re.escape(collector.path.name)}:(\d+): in <module>", text)
            report.outcome = "skipped"
            report.longrepr = (str(collector.path), int(line.group(1)) if line else 0,
                               f"Skipped: needs {missing.group(1)}, not installed here")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Files that hold a slow test go first (after the shuffle, which stays within each group): xdist's
    loadfile scheduling hands files out in this order, so the long ones start early and the short ones fill
    the end, instead of one worker finishing a long file while the other idles (longest-first scheduling;
    on suite-s5's per-file times ~10 s off the median run, ~55 s off the 90th percentile). Tests marked
    for a device the machine lacks are skipped with the reason."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)
    marked = [(item, kind) for item in items for kind in DEVICE_MARKS if item.get_closest_marker(kind)]
    if not marked:
        return
    present = device_kinds(machine_environment())
    for item, kind in marked:
        if kind not in present:
            item.add_marker(pytest.mark.skip(reason=f"needs a {kind} device, none here (docs/accelerators.md)"))


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    """The garbage collector rests while the test modules are imported (torch, JAX, pandas: ~1 s of full
    collections per process that found next to nothing), and then what collection left alive (~0.5-1 million
    objects, alive to the end) is moved out of its sight (gc.freeze): each full collection during the tests
    walked it all again (~0.3 s each, ~2-4 s of CPU per quick-loop worker). A young collection waits for
    10,000 new objects, not 700 (the tests' short-lived tables and arrays): the quick loop's two workers spent
    ~4.6 s of CPU in collections with the freeze alone, ~1.9 s with both (cycles are still freed, later)."""
    gc.disable()
    try:
        return (yield)
    finally:
        gc.freeze()
        gc.set_threshold(10_000, 10, 10)
        gc.enable()


def pytest_terminal_summary(terminalreporter, config):
    """The shuffled order's seed, even under -q (pytest-random-order puts it only in the header)."""
    seed = str(getattr(config.option, "random_order_seed", "") or "").removeprefix("default:")
    bucket = str(config.getoption("random_order_bucket", default="none")).removeprefix("default:")
    if seed and bucket != "none" and config.getoption("random_order_enabled", default=False):
        terminalreporter.write_line(f"test order shuffled with seed {seed} (replay: --random-order-seed={seed})")
