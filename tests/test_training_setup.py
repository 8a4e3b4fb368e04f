"""The training set-up (harness/setup.py): what a case trains on; a set too small for one step is refused here,
with its sizes (every trainer's steps per epoch come from the set-up)."""

from __future__ import annotations

import pytest


def test_a_training_set_smaller_than_one_global_batch_is_refused_with_its_sizes():
    from xpubench.case import Case
    from xpubench.harness.setup import training_setup

    case = Case(workload="mnist_cnn", backend="numpy", device="cpu", mode="train", batch_size=64, devices=2,
                train_samples=100, eval_samples=16)
    with pytest.raises(ValueError, match=r"less than one global batch \(100 samples, batch 64 x 2 device\(s\) = 128\)"):
        training_setup(case)
