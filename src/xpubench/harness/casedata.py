"""The data a model case trains on: synthetic (default: keeps input pipelines out of the measurement) or
real files, with the workload spec adapted to the real data's shapes."""

from __future__ import annotations

import dataclasses

import numpy as np


def case_data(case, spec):
    """(Dataset, spec) for a case; real data may change the spec's input/target shapes."""
    from xpubench import data

    n_train = case.train_samples or spec.train_samples
    n_eval = case.eval_samples or spec.eval_samples
    if case.data == "real":
        ds = data.load_real(spec, case.data_dir, download=bool(case.options.get("download")),
                            train_samples=n_train, eval_samples=n_eval)
        spec = dataclasses.replace(spec, input_shape=tuple(ds.x_train.shape[1:]),
                                   target_shape=tuple(ds.y_train.shape[1:]))
    else:
        ds = data.synthetic(spec, n_train, n_eval, seed=case.seed)
    return ds, spec


def batch_order(steps: int, epoch: int, seed: int) -> np.ndarray:
    """The order batches are visited in an epoch: shuffled per epoch, the same in every framework."""
    return np.random.default_rng([seed, epoch]).permutation(steps)
