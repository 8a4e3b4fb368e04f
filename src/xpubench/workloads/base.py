"""The one description every workload shares: what it computes, on what data, for how long.

A workload module (``xpubench/workloads/<name>.py``) defines::

    SPEC: WorkloadSpec
    def build_torch(spec) -> torch.nn.Module          # imports torch inside
    def build_jax(spec) -> flax.linen.Module          # imports flax inside
    def forward_flops(spec) -> int                    # analytic forward FLOPs for ONE sample

and is listed once in ``xpubench.workloads.REGISTRY``. Framework imports live inside the builders so
that ``import xpubench.workloads`` never imports a framework.

Conventions shared by both builders:
- inputs are channels-last for images (N, H, W, C) float32 in [0, 1]; tokens are int32 ids (N, T);
  series are float32 (N, T, F). The torch module permutes images to NCHW itself (a free view that
  has channels_last strides) so both frameworks see the same array.
- classification models return logits (softmax / sigmoid live in the loss); regression models
  return their final activation (e.g. sigmoid) and use ``loss="mse"``.
- jax modules take ``__call__(x, train: bool)``; dropout draws from the ``"dropout"`` rng; batch
  norm keeps running statistics in the ``"batch_stats"`` collection.
- FLOPs count a multiply-add as 2 FLOPs; training FLOPs per sample are taken as 3x forward
  (forward + backward w.r.t. activations and weights, Kaplan et al. 2020, section 2.1).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    title: str
    dataset: str                      # key of xpubench.data.DATASETS ("mnist", "cifar10", ...)
    input_shape: tuple[int, ...]      # one sample, e.g. (28, 28, 1), (250,), (1344, 20)
    input_kind: str                   # "image" | "tokens" | "series"
    target_kind: str                  # "class" | "binary" | "token_seq" | "series"
    num_outputs: int                  # classes, 1 for binary, vocabulary, or regression signals
    loss: str                         # "softmax_ce" | "sigmoid_bce" | "mse"
    metric: str                       # "accuracy" | "mse"
    optimizer: str                    # "adam" | "rmsprop"
    learning_rate: float
    batch_sizes: tuple[int, ...]      # the seeds' defaults
    quick_batch_size: int             # the brief default run (`xpubench run` with no arguments)
    epochs: int
    train_samples: int
    eval_samples: int
    vocab_size: int | None = None     # token inputs only
    target_shape: tuple[int, ...] = field(default=())  # one sample's target; () for a scalar label

    @property
    def train_flops_factor(self) -> int:
        """Training FLOPs per sample = 3 x forward FLOPs (see module docstring)."""
        return 3
