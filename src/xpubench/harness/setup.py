"""What every framework's trainer starts from, built once and framework-neutral: the workload's spec, the
case's data (synthetic or real, harness/casedata.py), the batch per device and over all devices, the
steps per epoch, the training FLOPs per sample and the learning rate (scaled linearly with the device
count under ``--lr-scaling``). A backend's Trainer only turns these into its framework's objects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from xpubench.harness.casedata import case_data
from xpubench.workloads import get_workload


@dataclass
class TrainingSetup:
    spec: Any                     # WorkloadSpec, adapted to real data's shapes
    forward_flops: float          # analytic forward FLOPs of one sample
    flops_per_sample: float       # training FLOPs of one sample (forward x spec.train_flops_factor)
    batch: int                    # per device
    world: int                    # devices (data-parallel ranks or mesh size)
    global_batch: int             # batch x world
    steps_per_epoch: int          # whole global batches in the training set
    learning_rate: float
    x_train: np.ndarray           # the first steps_per_epoch x global_batch training samples
    y_train: np.ndarray
    x_eval: np.ndarray
    y_eval: np.ndarray


def training_setup(case) -> TrainingSetup:
    """The set-up of ``case`` on its ``case.devices`` devices (data-parallel ranks or a mesh of that size)."""
    workload = get_workload(case.workload)
    ds, spec = case_data(case, workload.spec_for(case.options))
    # resolved by the planner: a case without a batch size is refused when made; the global batch is its rule
    batch, world, global_batch = case.batch_size, case.devices, case.global_batch
    steps = len(ds.x_train) // global_batch
    if steps < 1:
        raise ValueError(f"the training set holds less than one global batch ({len(ds.x_train)} samples, "
                         f"batch {batch} x {world} device(s) = {global_batch})")
    n = steps * global_batch
    forward = workload.forward_flops(spec)
    return TrainingSetup(spec=spec, forward_flops=forward, flops_per_sample=forward * spec.train_flops_factor,
                         batch=batch, world=world, global_batch=global_batch, steps_per_epoch=steps,
                         learning_rate=learning_rate(spec, case.options, world)[0], x_train=ds.x_train[:n],
                         y_train=ds.y_train[:n], x_eval=ds.x_test, y_eval=ds.y_test)


def learning_rate(spec, options: dict, world: int) -> tuple[float, str]:
    """The optimizer's learning rate and how it was scaled: the workload's, times the device count under
    ``--lr-scaling`` (linear scaling); never scaled with the batch size (a batch-size sweep runs every
    batch at the same rate, and results record it: metrics ``learning_rate``, ``lr_scaling``)."""
    if options.get("lr_scaling") and world > 1:
        rate = spec.learning_rate
        return rate * world, f"linear in the device count (--lr-scaling): {rate:g} x {world}"
    return spec.learning_rate, f"none: {spec.learning_rate:g} at every batch size and device count"
