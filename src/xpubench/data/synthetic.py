"""Synthetic data: random arrays of exactly the model's input and target shapes and dtypes.

Cheap to make (vectorised draws from a seeded numpy Generator; train and test come from separate
streams of the same seed) and free of any input pipeline, so that speed measurements time the model
only. There is no learnable signal: accuracy on synthetic data means nothing.

- images: float32 NHWC in [0, 1] (uint8 draws / 255); labels int32 in [0, num_outputs)
- tokens: int32 (N, T) in [0, vocab_size); labels int32 (class), float32 {0, 1} of shape (N,)
  (binary), or int32 (N, T) next-token targets in [0, vocab_size) (token_seq)
- series: float32 (N, T, F) in [0, 1); targets float32 (N, *target_shape) in [0, 1)
  (``(num_outputs,)`` when the spec gives no target_shape)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from xpubench.data.core import Dataset
from xpubench.errors import UserError

if TYPE_CHECKING:
    from xpubench.workloads.base import WorkloadSpec


def _inputs(spec: WorkloadSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    shape = (n, *spec.input_shape)
    if spec.input_kind == "image":
        x = rng.integers(0, 256, size=shape, dtype=np.uint8).astype(np.float32)
        x *= np.float32(1.0 / 255.0)
        return x
    if spec.input_kind == "tokens":
        return rng.integers(0, _vocab(spec), size=shape, dtype=np.int32)
    if spec.input_kind == "series":
        return rng.random(shape, dtype=np.float32)
    raise UserError(f"workload {spec.name}: unknown input kind {spec.input_kind!r}")


def _vocab(spec: WorkloadSpec) -> int:
    vocab = spec.vocab_size or spec.num_outputs
    if vocab < 1:
        raise UserError(f"workload {spec.name}: token inputs need a vocab_size")
    return int(vocab)


def _targets(spec: WorkloadSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    kind = spec.target_kind
    if kind == "class":
        return rng.integers(0, spec.num_outputs, size=(n, *spec.target_shape), dtype=np.int32)
    if kind == "binary":
        return rng.integers(0, 2, size=(n, *spec.target_shape), dtype=np.int8).astype(np.float32)
    if kind == "token_seq":
        shape = spec.target_shape or spec.input_shape[:1]
        return rng.integers(0, _vocab(spec), size=(n, *shape), dtype=np.int32)
    if kind == "series":
        shape = spec.target_shape or (spec.num_outputs,)
        return rng.random((n, *shape), dtype=np.float32)
    raise UserError(f"workload {spec.name}: unknown target kind {kind!r}")


def synthetic(spec: WorkloadSpec, train_samples: int, eval_samples: int, seed: int = 0) -> Dataset:
    """Random train and test arrays of the spec's shapes and dtypes (see the module docstring)."""
    if train_samples < 0 or eval_samples < 0:
        raise UserError(f"sample counts must not be negative (got {train_samples}, {eval_samples})")
    arrays = []
    for stream, n in ((0, train_samples), (1, eval_samples)):
        rng = np.random.default_rng([seed % 2**63, stream])
        arrays += [_inputs(spec, n, rng), _targets(spec, n, rng)]
    return Dataset(*arrays, source=f"synthetic (seed {seed})")
