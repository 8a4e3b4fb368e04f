"""The infer mode's figures (results/metrics.py; harness/inference.py fills them): latency of one batch
and whole passes with their spread, throughput, FLOPs, the predictions' quality beside the fp32 model's
(a quantized model's deltas), where the trained weights came from, and what int8 quantization covered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xpubench.results.metric_base import figure
from xpubench.results.metrics_common import Common


@dataclass
class InferMetrics(Common):
    """Inference (harness/inference.py)."""

    GROUP: ClassVar[str] = "infer"
    compile_s: float | None = figure("s", "ahead-of-time compilation of predict (None: eager)")
    first_call_s: float | None = figure("s", "the first prediction of batch 0")
    batch: int | None = figure("count", "rows per call")
    eval_samples: int | None = figure("count", "samples predicted")
    batches: int | None = figure("count", "calls per pass")
    pad_rows: int | None = figure("count", "zero rows padding the last batch (computed, not counted)")
    predictions: int | None = figure("count", "predictions scored")
    latency_s: float | None = figure("s", "median synchronised call of one batch")
    latency_p90_s: float | None = figure("s", "90th percentile of latency")
    latency_iqr_s: float | None = figure("s", "inter-quartile range of latency")
    latency_cv: float | None = figure("ratio", "coefficient of variation of latency")
    latency_ci95_low_s: float | None = figure("s", "95% interval of latency_s, low end")
    latency_ci95_high_s: float | None = figure("s", "95% interval of latency_s, high end")
    us_per_sample: float | None = figure("us", "latency_s / batch, in microseconds")
    batch_samples_per_s: float | None = figure("1/s", "batch / latency_s")
    pass_s: float | None = figure("s", "median pass over all samples, batches dispatched back to back")
    passes: int | None = figure("count", "passes measured")
    samples_per_s: float | None = figure("1/s", "eval_samples / pass_s")
    model_bytes: int | None = figure("B", "the weights as held for inference")
    metric_name: str | None = figure("text", "accuracy or mse")
    loss: float | None = figure("count", "loss of the predictions")
    accuracy: float | None = figure("ratio", "accuracy of the predictions", optional=True)
    mse: float | None = figure("count", "mean squared error of the predictions", optional=True)
    fp32_loss: float | None = figure("count", "the fp32 model's loss on the same samples", optional=True)
    fp32_accuracy: float | None = figure("ratio", "the fp32 model's accuracy on the same samples", optional=True)
    fp32_mse: float | None = figure("count", "the fp32 model's MSE on the same samples", optional=True)
    fp32_model_bytes: int | None = figure("B", "the fp32 weights", optional=True)
    size_ratio: float | None = figure("ratio", "model_bytes / fp32_model_bytes", optional=True)
    loss_delta: float | None = figure("count", "loss minus the fp32 model's", optional=True)
    accuracy_delta: float | None = figure("ratio", "accuracy minus the fp32 model's", optional=True)
    mse_delta: float | None = figure("count", "MSE minus the fp32 model's", optional=True)
    weights_source: str | None = figure("text", "trained here, or the cache of the same training run")
    weights_sha256: str | None = figure("text", "digest of the trained fp32 weights")
    weights_file: str | None = figure("text", "where the weights are kept (.npz)", optional=True)
    train_s: float | None = figure("s", "the untimed training the weights came from", optional=True)
    train_epochs: int | None = figure("count", "epochs of that training")
    train_steps: int | None = figure("count", "steps per epoch of that training")
    flops_per_sample: float | None = figure("FLOP", "forward FLOPs of one sample (inference runs the forward "
                                                    "pass only: = forward_flops_per_sample)")
    forward_flops_per_sample: float | None = figure("FLOP", "forward FLOPs of one sample (analytic, or measured for "
                                                            "a user's model)", optional=True)
    achieved_flops_per_s: float | None = figure("FLOP/s", "flops_per_sample x samples_per_s")
    int8_layers: str | None = figure("text", "layers quantized to int8")
    fp32_layers: str | None = figure("text", "layers left in fp32")
    int8_param_fraction: float | None = figure("ratio", "share of the weights int8 covers")
    quantization: str | None = figure("text", "how int8 was made (dynamic, static FX, weight-only, Keras)")
