"""JAX backend: matmul, training and inference cases (CPU, GPU and TPU through PJRT); data parallel over
N devices (and processes) when ``case.devices`` > 1 (``parallel.py``)."""

from __future__ import annotations

from xpubench.harness.outcome import Outcome


def run_case(case) -> Outcome:
    if case.precision == "tf32":
        from xpubench.backends.jax_.device import jax_devices, tf32_unavailable

        problem = tf32_unavailable(jax_devices(case.device)[0])
        if problem:
            return Outcome(status="skipped", message=problem)
    if case.mode == "matmul":
        from xpubench.backends.jax_.matmul import run
    elif case.devices > 1:
        from xpubench.backends.jax_ import parallel

        run = parallel.run if case.mode == "train" else parallel.run_infer
    elif case.mode == "train":
        from xpubench.backends.jax_.train import run
    else:
        from xpubench.backends.jax_.infer import run
    return run(case)
