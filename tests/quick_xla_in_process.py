"""``quick_xla_in_process``: the JAX programs a test module compiles in the pytest process itself skip most of
XLA's optimisation work (``jax_disable_most_optimizations``: backend optimisation level 0, LLVM's expensive
passes off; the HLO passes that decide what is computed still run), as tests/quick_compile.py's
``quick_xla_workers`` does for worker processes. For modules about what a program computes, allocates or
records, never about its speed. Module-scoped: on leaving the module the flag is restored and JAX's caches
of compiled programs are cleared, so no later test in the same process runs an unoptimised program. Use it
with ``pytestmark = pytest.mark.usefixtures("quick_xla_in_process")`` after importing it."""

from __future__ import annotations

import pytest

FLAG = "jax_disable_most_optimizations"


@pytest.fixture(scope="module")
def quick_xla_in_process():
    jax = pytest.importorskip("jax")
    before = jax.config.values.get(FLAG, False)
    jax.config.update(FLAG, True)
    try:
        yield
    finally:
        jax.config.update(FLAG, before)
        jax.clear_caches()
