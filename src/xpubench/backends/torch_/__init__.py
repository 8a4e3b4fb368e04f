"""PyTorch backend: matmul, training and inference cases."""

from __future__ import annotations

from xpubench.harness.outcome import Outcome


def run_case(case) -> Outcome:
    if case.mode == "matmul":
        from xpubench.backends.torch_.matmul import run
    elif case.mode == "train" and case.devices > 1:
        from xpubench.backends.torch_.ddp import run
    elif case.mode == "train":
        from xpubench.backends.torch_.train import run
    else:
        from xpubench.backends.torch_.infer import run
    return run(case)
