"""Every figure a result can carry, declared once: its name, unit and meaning (after pyperf's metadata
info and optimum-benchmark's typed measurements).

The measuring code fills the per-mode dataclasses (``MatmulMetrics``, ``TrainMetrics``, ``InferMetrics``,
``GenerateMetrics``; each mode's record in results/modes.py names its dataclass and the figures readers
rank); what is added around a measurement (peak and efficiency, data-parallel scaling,
the worker processes, energy, cost, the model's provenance: results/metrics_added.py; a failure) has a group
of its own.
``REGISTRY`` maps every name to its :class:`Metric`; reports read units and meanings from it. A result's
``metrics`` stay a flat JSON object (the file format does not change): ``Metrics.as_dict()`` writes it,
and ``check(metrics)`` refuses a name nobody declared.

Units: s (seconds), us (microseconds), 1/s (per second), FLOP, FLOP/s, B (bytes), B/s, J (joules), W, USD, ratio (a
fraction: 0.42 = 42%), count, flag (true/false), text.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

# the base lives in metric_base.py (so that groups in modules of their own avoid an import cycle);
# re-exported here, where every caller has always found it
from xpubench.results.metric_base import UNITS, Metric, Metrics, figure  # noqa: F401
from xpubench.results.metrics_added import Cost, Efficiency, Energy, Model, Processes, Scaling
from xpubench.results.metrics_generate import LanguageModelGeneration
from xpubench.results.metrics_runtime import RuntimeFacts
from xpubench.results.metrics_target import TimeToTarget

# ---- what each mode measures ---------------------------------------------------------------------------

@dataclass
class Common(Metrics):
    """Figures any case may carry (each mode's dataclass extends it)."""

    GROUP: ClassVar[str] = "common"
    warning: str | None = figure("text", "why a figure should not be trusted (unstable, few samples, budget cut, "
                                          "processes that disagree), or None")
    error_type: str | None = figure("text", "the exception's type when the case failed", optional=True)
    traceback: str | None = figure("text", "the end of the failure's traceback", optional=True)
    compiled: bool | None = figure("flag", "whether the framework's compiler ran (torch.compile, XLA jit, Keras "
                                           "jit_compile)", optional=True)
    compile_fallback: str | None = figure("text", "why compilation was asked for but eager ran instead", optional=True)
    autotune: str | None = figure("text", "the kernel autotuning in effect (cudnn.benchmark, XLA's GPU autotune "
                                          "level)", optional=True)
    matmul_precision: str | None = figure("text", "what fp32 matmuls ran as: highest (true fp32), tensorfloat32, "
                                                  "default", optional=True)
    peak_memory_bytes: int | None = figure("B", "device memory high-water mark since the measurement began "
                                                "(CPU: the worker's peak resident set)", optional=True)
    behaviour: str | None = figure("text", "selftest: the deliberate behaviour", optional=True)
    value: float | None = figure("count", "selftest: a figure (NaN for the nan behaviour)", optional=True)


@dataclass
class MatmulMetrics(Common):
    """N x N products (harness/matmul.py)."""

    GROUP: ClassVar[str] = "matmul"
    flops_per_call: float | None = figure("FLOP", "2 N^3: one product")
    cold_s: float | None = figure("s", "the first product, compile and library set-up included")
    warm_s: float | None = figure("s", "steady product time: median of calibrated windows (of the processes' "
                                       "medians, with several processes)")
    cold_flops_per_s: float | None = figure("FLOP/s", "flops_per_call / cold_s")
    warm_flops_per_s: float | None = figure("FLOP/s", "flops_per_call / warm_s")
    warm_iqr_s: float | None = figure("s", "inter-quartile range of the warm windows")
    warm_cv: float | None = figure("ratio", "coefficient of variation of the warm windows")
    warm_ci95_low_s: float | None = figure("s", "95% interval of warm_s, low end")
    warm_ci95_high_s: float | None = figure("s", "95% interval of warm_s, high end")
    reps_per_window: int | None = figure("count", "products per timed window (calibrated)")
    max_rel_error: float | None = figure("ratio", "largest error of checked rows against float64, relative to "
                                                  "the largest value")


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


@dataclass
class GenerateMetrics(Common, LanguageModelGeneration, RuntimeFacts):
    """Generation with a KV cache (harness/generation.py); a language model's weights, cache and bounds
    (results/metrics_generate.py)."""

    GROUP: ClassVar[str] = "generate"
    compile_s: float | None = figure("s", "ahead-of-time compilation of prefill and decode")
    first_round_s: float | None = figure("s", "the first generation, untimed set-up included")
    batch: int | None = figure("count", "sequences generated together")
    prompt_len: int | None = figure("count", "prompt tokens per sequence")
    new_tokens: int | None = figure("count", "tokens generated per sequence")
    rounds: int | None = figure("count", "generations measured")
    prefill_s: float | None = figure("s", "median prefill of the prompt batch")
    prefill_tokens_per_s: float | None = figure("1/s", "batch x prompt_len / prefill_s")
    ttft_s: float | None = figure("s", "time to first token: median prefill until the first token is ready")
    ttft_p90_s: float | None = figure("s", "90th percentile of ttft")
    decode_token_s: float | None = figure("s", "the decode step (one token per sequence): the median over rounds of "
                                               "a round's mean step")
    decode_token_p50_s: float | None = figure("s", "per-token latency, 50th percentile")
    decode_token_p90_s: float | None = figure("s", "per-token latency, 90th percentile")
    decode_token_cv: float | None = figure("ratio", "coefficient of variation of decode steps")
    decode_token_ci95_low_s: float | None = figure("s", "95% interval of decode_token_s, low end")
    decode_token_ci95_high_s: float | None = figure("s", "95% interval of decode_token_s, high end")
    decode_tokens_per_s: float | None = figure("1/s", "batch / decode_token_s")
    tokens_per_s: float | None = figure("1/s", "generated tokens per second over a whole generation")
    attention_kernel_prefill: str | None = figure("text", "the attention implementation of prefill")
    attention_kernel_decode: str | None = figure("text", "the attention implementation of decode")
    flops_per_sample: float | None = figure("FLOP", "forward FLOPs of one decoded token at the decode steps' "
                                                    "mean context", optional=True)
    achieved_flops_per_s: float | None = figure("FLOP/s", "decode FLOP rate: flops_per_sample x decode_tokens_per_s",
                                                optional=True)


# the modes' groups (results/modes.py)
MODE_GROUPS: tuple[type[Metrics], ...] = (MatmulMetrics, TrainMetrics, InferMetrics, GenerateMetrics)
SHARED: tuple[type[Metrics], ...] = (Common, Efficiency, Scaling, Processes, Energy, Cost, Model,
                                     TimeToTarget)   # training to a quality target (metrics_target.py)
REGISTRY: dict[str, Metric] = {}


def declare(cls: type[Metrics]) -> None:
    """Add a group's figures to ``REGISTRY`` (a name declared twice keeps its first declaration; two units
    for one name are refused)."""
    for f in dataclasses.fields(cls):
        info = Metric(f.name, f.metadata["unit"], f.metadata["meaning"], cls.GROUP)
        if f.name in REGISTRY and REGISTRY[f.name].unit != info.unit:
            raise TypeError(f"metric {f.name} declared with units {REGISTRY[f.name].unit} and {info.unit}")
        REGISTRY.setdefault(f.name, info)


for _group in (*SHARED, *MODE_GROUPS):
    declare(_group)


def unit(name: str) -> str | None:
    info = REGISTRY.get(name)
    return info.unit if info else None


def unknown(metrics: dict[str, Any]) -> list[str]:
    """The names in ``metrics`` that nobody declared."""
    return [k for k in metrics if k not in REGISTRY]


def check(metrics: dict[str, Any]) -> dict[str, Any]:
    """``metrics`` unchanged when every name is declared; ValueError naming the others otherwise (the
    parent checks every worker's figures, so a misspelt name fails its case instead of vanishing)."""
    bad = unknown(metrics)
    if bad:
        raise ValueError(f"undeclared metric(s) {', '.join(sorted(bad))}: declare them in results/metrics.py")
    return metrics
