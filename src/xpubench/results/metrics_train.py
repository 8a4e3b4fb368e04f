"""The train mode's figures (results/metrics.py; harness/training.py fills them): compile, first step and
first epoch kept apart, steady steps and epochs with their spread, throughput, FLOPs, the losses and
metric reached, and how the step ran (attention kernel, fp16 loss scaling, Keras's backend)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xpubench.results.metric_base import figure
from xpubench.results.metrics_common import Common


@dataclass
class TrainMetrics(Common):
    """Training (harness/training.py)."""

    GROUP: ClassVar[str] = "train"
    sync: str | None = figure("text", "synchronisation: step (every step) or epoch (pipelined steady epochs)")
    step_ahead: bool | None = figure("flag", "sync step: the steady steps ran one ahead (a step queued before the "
                                             "host waits for the one before it: JAX on a CPU)", optional=True)
    compile_s: float | None = figure("s", "ahead-of-time compilation of the train step (None: eager)")
    first_step_s: float | None = figure("s", "the very first step")
    first_epoch_s: float | None = figure("s", "the first epoch, compile-heavy, kept apart")
    epoch_s: float | None = figure("s", "median steady epoch (epochs 2+)")
    epochs_run: int | None = figure("count", "complete epochs")
    steps_per_epoch: int | None = figure("count", "steps per epoch")
    budget_hit: bool | None = figure("flag", "the time budget cut the run short")
    budget_cut_steps: int | None = figure("count", "steps of the epoch the budget cut")
    global_batch: int | None = figure("count", "samples per optimizer step, all devices together")
    step_s: float | None = figure("s", "median steady step")
    step_p90_s: float | None = figure("s", "90th percentile of steady steps")
    step_iqr_s: float | None = figure("s", "inter-quartile range of steady steps")
    step_cv: float | None = figure("ratio", "coefficient of variation of steady steps")
    step_ci95_low_s: float | None = figure("s", "95% interval of step_s, low end")
    step_ci95_high_s: float | None = figure("s", "95% interval of step_s, high end")
    us_per_sample: float | None = figure("us", "step_s / global_batch, in microseconds")
    samples_per_s: float | None = figure("1/s", "global_batch / step_s")
    epoch_samples_per_s: float | None = figure("1/s", "samples of a steady epoch / epoch_s")
    eval_s: float | None = figure("s", "median validation pass (never part of epoch time)")
    flops_per_sample: float | None = figure("FLOP", "training FLOPs of one sample: forward and backward, counted "
                                                    "as 3 x forward_flops_per_sample (the built-in workloads' "
                                                    "convention)")
    forward_flops_per_sample: float | None = figure("FLOP", "forward FLOPs of one sample (analytic, or measured for "
                                                            "a user's model)", optional=True)
    achieved_flops_per_s: float | None = figure("FLOP/s", "flops_per_sample x samples_per_s")
    final_loss: float | None = figure("count", "mean training loss of the last epoch")
    final_val_loss: float | None = figure("count", "validation loss after the last epoch")
    final_metric: float | None = figure("count", "validation metric (accuracy or MSE) after the last epoch")
    tokens_per_s: float | None = figure("1/s", "token models: samples_per_s x sequence length", optional=True)
    attention_kernel: str | None = figure("text", "the attention implementation that ran (flash, efficient, "
                                                  "cudnn, math, xla)", optional=True)
    loss_scaling: str | None = figure("text", "fp16: how the loss is scaled (dynamic loss scaling)", optional=True)
    final_loss_scale: float | None = figure("count", "fp16: the dynamic loss scale at the end", optional=True)
    keras_backend: str | None = figure("text", "Keras: the backend that ran fit", optional=True)
    keras_version: str | None = figure("text", "Keras: its version", optional=True)
