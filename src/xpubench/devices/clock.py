"""The clock a CPU core really runs at under load, measured, for the CPU peak estimate (devices/cpu.py).

Why: under a hypervisor /proc/cpuinfo's "cpu MHz" is often the base clock (2.60 GHz on the project's
AMD EPYC VMs) while the cores boost far above it (3.66 GHz measured on Zen 4, >= 4.0 GHz on Zen 5), so a
peak built from it is exceeded by real matmuls. No portable API reads the running clock inside a VM.

How: time a chain of dependent integer operations whose latency every core shares. One round is
``x = (x + y) ^ z`` on 32-bit integers: an add and an xor, each waiting for the one before, and each
one cycle on every x86-64 core (Intel since the P6, AMD since the K7) and every AArch64 core of the last
decade. XLA compiles it (``lax.fori_loop``, 16 rounds per iteration) into a loop of register-register
``add``/``xor`` pairs; nothing folds it (the operands are runtime values and ``+`` and ``^`` do not
associate with each other). Two loop lengths are timed, each the fastest of ``REPEATS`` calls (an
interrupted call is only slower); the slope between them removes the call's fixed cost:
clock = 2 cycles x extra rounds / extra seconds.

What it is: the clock of one busy core (a single-core boost). With every core busy a CPU may run slower,
so the estimate built on it is an upper bound for the whole CPU, which is what a peak must be.
Without JAX (or when its CPU backend cannot run) there is no measurement: None.
"""

from __future__ import annotations

import os
import time

CYCLES_PER_ROUND = 2          # one add + one xor, each 1 cycle of latency
ROUNDS_PER_ITERATION = 16
ITERATIONS = (2_000, 22_000)  # the two loop lengths (the longer: ~0.2 ms at 3.6 GHz)
REPEATS = 25
WARM_S = 0.05                 # busy time before timing, so a power-saving core has ramped its clock up
SANE_GHZ = (0.2, 10.0)        # outside this the measurement is rejected (a broken timer or compiler)
METHOD = ("a dependent chain of 32-bit adds and xors (1 cycle each) compiled by XLA, timed on one busy core: "
          "the fastest of 25 calls at two lengths, clock = extra cycles / extra seconds")


def _chain(iterations: int):
    import jax
    from jax import lax

    def run(x, y, z):
        def body(_, x):
            for _ in range(ROUNDS_PER_ITERATION):
                x = (x + y) ^ z
            return x
        return lax.fori_loop(0, iterations, body, x)

    return jax.jit(run)


def _fastest(fn, args, repeats: int, clock=time.perf_counter) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        fn(*args).block_until_ready()
        best = min(best, clock() - start)
    return best


def slope_ghz(short_s: float, long_s: float, iterations: tuple[int, int] = ITERATIONS) -> float | None:
    """The clock from the fastest times of the two loop lengths, or None when they make no sense."""
    extra = long_s - short_s
    if extra <= 0:
        return None
    ghz = CYCLES_PER_ROUND * ROUNDS_PER_ITERATION * (iterations[1] - iterations[0]) / extra / 1e9
    return ghz if SANE_GHZ[0] <= ghz <= SANE_GHZ[1] else None


def measured_mhz() -> tuple[float | None, str]:
    """(the clock of one busy core in MHz, how it was measured) or (None, why not)."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # as detection imports JAX
    try:
        import jax
        import jax.numpy as jnp

        with jax.default_device(jax.devices("cpu")[0]):
            args = (jnp.uint32(1), jnp.uint32(0x9E3779B9), jnp.uint32(0x7F4A7C15))
            short, long = (_chain(n) for n in ITERATIONS)
            short(*args).block_until_ready()
            end = time.perf_counter() + WARM_S
            while time.perf_counter() < end:
                long(*args).block_until_ready()
            times = [float("inf"), float("inf")]
            for _ in range(REPEATS):   # interleaved: a slow spell of the machine touches both lengths
                times = [min(t, _fastest(fn, args, 1)) for t, fn in zip(times, (short, long))]
    except Exception as exc:  # noqa: BLE001 - no JAX, no CPU backend: no measurement, said why
        return None, f"not measured ({type(exc).__name__}: {str(exc).strip()[:120]})"
    ghz = slope_ghz(*times)
    if ghz is None:
        return None, f"not measured (timings {times[0]:.2e} s and {times[1]:.2e} s make no sense)"
    return round(ghz * 1000, 1), METHOD
