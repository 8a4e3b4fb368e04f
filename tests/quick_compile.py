"""``quick_xla_workers``: the JAX worker processes a test starts compile with XLA's backend optimisation
level 0 (``XLA_FLAGS=--xla_backend_optimization_level=0``), for tests about what a run records, not how
fast its steps run. On this 2-core CPU a model's init and train-step programs take 4-5x less CPU time to
compile (mnist_cnn's ``model.init`` 5.4 s -> 1.3 s, a whole batch-4 training case 16 s -> 5 s), the same
jitted functions, the same recorded fields. Use it like ``one_thread_workers``; never in a test that
asserts a speed."""

from __future__ import annotations

import contextlib
import os

import pytest

QUICK_XLA = "--xla_backend_optimization_level=0"
# the same, for one program compiled in the test's own process: ``lowered.compile(QUICK_XLA_OPTIONS)``. The
# level is LLVM's, after XLA's HLO passes: a program's cost analysis (its FLOPs) and its HLO text are those
# of the default level (shakespeare_lstm's unrolled gradient: 217,531,824 FLOPs either way, 6.8 s of CPU to
# compile instead of 12.6 s).
QUICK_XLA_OPTIONS = {"xla_backend_optimization_level": 0}


@pytest.fixture
def quick_xla_workers(monkeypatch) -> None:
    flags = os.environ.get("XLA_FLAGS", "")
    monkeypatch.setenv("XLA_FLAGS", f"{flags} {QUICK_XLA}".strip())


# ``quick_xla_in_process``: the JAX programs a test module compiles in the pytest process itself skip most of XLA's
# optimisation work (``jax_disable_most_optimizations``: backend optimisation level 0, LLVM's expensive passes off;
# the HLO passes that decide what is computed still run), as ``quick_xla_workers`` does for worker processes. For
# modules about what a program computes, allocates or records, never about its speed. Module-scoped: on leaving the
# module the flag is restored and JAX's caches of compiled programs are cleared, so no later test in the same process
# runs an unoptimised program. Use it with ``pytestmark = pytest.mark.usefixtures("quick_xla_in_process")`` after
# importing it.
IN_PROCESS_FLAG = "jax_disable_most_optimizations"


@contextlib.contextmanager
def unoptimised_jax():
    """IN_PROCESS_FLAG on inside, then as before, with JAX's compiled programs cleared."""
    jax = pytest.importorskip("jax")
    before = jax.config.values.get(IN_PROCESS_FLAG, False)
    jax.config.update(IN_PROCESS_FLAG, True)
    try:
        yield
    finally:
        jax.config.update(IN_PROCESS_FLAG, before)
        jax.clear_caches()


@pytest.fixture(scope="module")
def quick_xla_in_process():
    with unoptimised_jax():
        yield


@pytest.fixture
def quick_xla_one_test():
    """quick_xla_in_process for one test (a module whose other tests compile at XLA's default level)."""
    with unoptimised_jax():
        yield


# A call item for tests/batch_worker.py (``("quick_compile:most_optimizations", False)``), for a JAX batch worker
# whose cases are about what a run records, not its speed: ``False`` before the cases to compile cheaply (as
# quick_xla_workers: backend level 0), ``True`` before those whose steps cost more than their compile at level 0
# (the recurrent models over long sequences: weather_gru's every-workload case took 20 CPU s at level 0, 12.5 at the
# default level).
def most_optimizations(on: bool) -> None:
    import jax

    jax.config.update(IN_PROCESS_FLAG, not on)
