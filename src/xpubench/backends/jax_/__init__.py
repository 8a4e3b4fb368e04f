"""JAX backend: matmul, training and inference cases (CPU, GPU and TPU through PJRT)."""

from __future__ import annotations

from xpubench.harness.outcome import Outcome


def run_case(case) -> Outcome:
    if case.mode == "matmul":
        from xpubench.backends.jax_.matmul import run
    elif case.mode == "train":
        from xpubench.backends.jax_.train import run
    else:
        from xpubench.backends.jax_.infer import run
    return run(case)
