"""PyTorch backend: matmul, training and inference cases; DistributedDataParallel training over N
processes when ``case.devices`` > 1 (``ddp.py``)."""

from __future__ import annotations

from xpubench.harness.outcome import Outcome

NO_DDP_INFERENCE = ("data-parallel inference is not implemented for torch (DistributedDataParallel is a "
                    "training wrapper): run torch inference with --devices 1, or jax with --devices N")


def run_case(case) -> Outcome:
    if case.precision == "tf32":
        from xpubench.backends.torch_.device import tf32_unavailable, torch_device

        problem = tf32_unavailable(torch_device(case.device))
        if problem:
            return Outcome(status="skipped", message=problem)
    if case.mode == "matmul":
        from xpubench.backends.torch_.matmul import run
    elif case.mode == "train" and case.devices > 1:
        from xpubench.backends.torch_.ddp import run
    elif case.mode == "train":
        from xpubench.backends.torch_.train import run
    elif case.devices > 1:
        return Outcome(status="skipped", message=NO_DDP_INFERENCE)
    else:
        from xpubench.backends.torch_.infer import run
    return run(case)
