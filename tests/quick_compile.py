"""``quick_xla_workers``: the JAX worker processes a test starts compile with XLA's backend optimisation
level 0 (``XLA_FLAGS=--xla_backend_optimization_level=0``), for tests about what a run records, not how
fast its steps run. On this 2-core CPU a model's init and train-step programs take 4-5x less CPU time to
compile (mnist_cnn's ``model.init`` 5.4 s -> 1.3 s, a whole batch-4 training case 16 s -> 5 s), the same
jitted functions, the same recorded fields. Use it like ``one_thread_workers``; never in a test that
asserts a speed."""

from __future__ import annotations

import os

import pytest

QUICK_XLA = "--xla_backend_optimization_level=0"


@pytest.fixture
def quick_xla_workers(monkeypatch) -> None:
    flags = os.environ.get("XLA_FLAGS", "")
    monkeypatch.setenv("XLA_FLAGS", f"{flags} {QUICK_XLA}".strip())
