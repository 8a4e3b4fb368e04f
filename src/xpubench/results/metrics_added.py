"""The figures added around a measurement, a group each: against the chip (efficiency), data-parallel
scaling, the case's worker processes folded together, energy, cost, and a user's own model's provenance.
The per-mode figures (what a case measures) are each mode's module's (results/metrics_train.py...);
results/metrics.py lists these groups in ``SHARED`` and declares them in ``REGISTRY``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xpubench.results.metric_base import Metrics, figure


@dataclass
class Efficiency(Metrics):
    """Against the chip: spec peak (analysis/peak.py) and measured ceilings (ceilings/)."""

    GROUP: ClassVar[str] = "efficiency"
    peak_flops_per_s: float | None = figure("FLOP/s", "the chip's dense peak at this precision (CPU: an estimate; "
                                                      "None when unknown)", optional=True)
    peak_is_estimate: bool | None = figure("flag", "the peak is the CPU estimate, not a vendor figure", optional=True)
    pct_of_peak: float | None = figure("ratio", "matmul: warm FLOP/s / peak", optional=True)
    mfu: float | None = figure("ratio", "models: achieved FLOP/s / peak (model FLOPs utilisation)", optional=True)
    peak_warning: str | None = figure("text", "why a % of peak above 100% is possible here", optional=True)
    ceiling_flops_per_s: float | None = figure("FLOP/s", "the measured ceiling of this backend, device and dtype",
                                               optional=True)
    pct_of_ceiling: float | None = figure("ratio", "achieved FLOP/s / measured ceiling", optional=True)
    ceiling_source: str | None = figure("text", "where the ceiling came from (this run, the cache)", optional=True)
    ceiling_is_lower_bound: bool | None = figure("flag", "the ceiling is the file's fastest matmul of the group, a "
                                                         "lower bound (no ceiling was measured)", optional=True)
    arithmetic_intensity: float | None = figure("FLOP/B", "FLOPs per byte moved", optional=True)
    bytes_per_sample: float | None = figure("B", "bytes moved per sample (XLA cost analysis or a count)",
                                            optional=True)
    bytes_per_call: float | None = figure("B", "matmul: the least one product moves (read A and B, write C)",
                                          optional=True)
    bytes_unknown: str | None = figure("text", "why bytes_per_sample is unknown (the roofline cannot place the "
                                               "case)", optional=True)
    ceiling_rel_noise: float | None = figure("ratio", "half-width of the ceiling's 95% interval / the ceiling",
                                             optional=True)
    achieved_rel_noise: float | None = figure("ratio", "half-width of the result's 95% interval / its median",
                                              optional=True)
    measured_bandwidth: float | None = figure("B/s", "the measured memory bandwidth (STREAM copy / triad) of this "
                                                     "backend and device", optional=True)
    roofline_flops_per_s: float | None = figure("FLOP/s", "the measured roofline at this intensity: min(ceiling, "
                                                          "intensity x measured bandwidth)", optional=True)
    peak_label: str | None = figure("text", "what the % of peak column prints (never a bare number above 100%)",
                                    optional=True)
    ceiling_label: str | None = figure("text", "what the % of ceiling column prints", optional=True)
    efficiency_note: str | None = figure("text", "why a % reads as it does (estimate exceeded, within noise, "
                                                 "ceiling raised, no ceiling cached)", optional=True)


@dataclass
class Scaling(Metrics):
    """Data parallel (analysis/scaling.py)."""

    GROUP: ClassVar[str] = "scaling"
    devices: int | None = figure("count", "devices the case ran on", optional=True)
    per_device_batch: int | None = figure("count", "batch on each device", optional=True)
    scaling_base_devices: int | None = figure("count", "the fewest devices of the same case (N0)", optional=True)
    scaling_speedup: float | None = figure("ratio", "samples/s at N / samples/s at N0", optional=True)
    scaling_efficiency: float | None = figure("ratio", "speedup / (N / N0)", optional=True)
    scaling_note: str | None = figure("text", "why the efficiency is not hardware scaling", optional=True)
    world_size: int | None = figure("count", "processes (ranks) of a data-parallel case", optional=True)
    rank: int | None = figure("count", "the rank whose figures these are (rank 0, or a host's first)", optional=True)
    parallelism: str | None = figure("text", "how the devices work together (DDP and its launcher, a JAX mesh)",
                                     optional=True)
    ddp_backend: str | None = figure("text", "DistributedDataParallel's process group (gloo, nccl)", optional=True)
    threads_per_process: int | None = figure("count", "CPU threads of each rank", optional=True)
    pinned_cores: str | None = figure("text", "the CPU cores a rank is pinned to", optional=True)
    hosts: int | None = figure("count", "hosts of a multi-host case", optional=True)


@dataclass
class Processes(Metrics):
    """The case's worker processes folded together (results/fold.py)."""

    GROUP: ClassVar[str] = "processes"
    processes: int | None = figure("count", "worker processes whose figures made the result", optional=True)
    process_between_spread: float | None = figure("ratio", "range of the process medians / the figure",
                                                  optional=True)
    process_within_spread: float | None = figure("ratio", "median over processes of their own IQR / median",
                                                 optional=True)
    process_disagreement: str | None = figure("text", "bimodal, machine state changed, or None", optional=True)
    launch: str | None = figure("text", "how the worker process started: forkserver (forked from a server that had "
                                        "imported the framework, untimed) or spawn (a fresh interpreter)",
                                optional=True)
    launcher: str | None = figure("text", "what started the run's processes, where there were several: srun (a Slurm "
                                          "step's tasks) or hosts (by hand); docs/distributed.md", optional=True)
    case_s: float | None = figure("s", "the worker's wall time in its case: set-up, compilation and measurement "
                                       "(the rest of the process's duration_s is its start, imports, and exit)",
                                  optional=True)


@dataclass
class Energy(Metrics):
    """Energy read around the timed windows (energy/)."""

    GROUP: ClassVar[str] = "energy"
    energy_joules: float | None = figure("J", "energy of the measured region", optional=True)
    energy_source: str | None = figure("text", "the counter read (RAPL package, NVML, AMD SMI)", optional=True)
    energy_na: str | None = figure("text", "why no energy figure (no counter, no permission)", optional=True)
    energy_warning: str | None = figure("text", "what the energy figure includes beyond the case", optional=True)
    average_watts: float | None = figure("W", "energy / duration of the measured region", optional=True)
    joules_per_step: float | None = figure("J", "per optimizer step", optional=True)
    joules_per_epoch: float | None = figure("J", "per steady epoch", optional=True)
    joules_per_sample: float | None = figure("J", "per sample", optional=True)
    samples_per_joule: float | None = figure("count", "samples per joule", optional=True)
    energy_seconds: float | None = figure("s", "the wall time the energy was read over", optional=True)


@dataclass
class Cost(Metrics):
    """Cost from a price per device-hour (cost.py)."""

    GROUP: ClassVar[str] = "cost"
    usd_per_hour: float | None = figure("USD", "the price given for this device (x devices)", optional=True)
    usd_per_1m_samples: float | None = figure("USD", "per million training samples", optional=True)
    usd_per_epoch: float | None = figure("USD", "per steady epoch", optional=True)
    usd_per_1m_predictions: float | None = figure("USD", "per million predictions", optional=True)
    usd_per_1m_tokens: float | None = figure("USD", "per million generated tokens, at the decode rate", optional=True)
    usd_per_1m_prompt_tokens: float | None = figure("USD", "per million prompt tokens, at the prefill rate",
                                                    optional=True)
    usd_per_pflop: float | None = figure("USD", "matmul: per 10^15 FLOPs at the warm rate", optional=True)
    usd_to_target: float | None = figure("USD", "a quality target: the time to target, priced", optional=True)
    cost_na: str | None = figure("text", "why no cost figure (no price given for this device)", optional=True)


@dataclass
class Model(Metrics):
    """A user's own model (usermodel/)."""

    GROUP: ClassVar[str] = "model"
    model_name: str | None = figure("text", "FILE.py:FUNCTION", optional=True)
    model_class: str | None = figure("text", "the model object's class", optional=True)
    model_framework: str | None = figure("text", "torch, flax or keras", optional=True)
    model_params: int | None = figure("count", "trainable parameters", optional=True)
    model_sha256: str | None = figure("text", "digest of the model's file", optional=True)
    model_file: str | None = figure("text", "the model's file", optional=True)
    flops_method: str | None = figure("text", "how FLOPs were measured (FlopCounterMode, XLA cost analysis), or "
                                              "why they are n/a", optional=True)
    model_output: str | None = figure("text", "which part of the model's output the logits were taken from (the "
                                              "output, .logits of a Hugging Face ModelOutput, ['logits'] of a dict, "
                                              "a tuple's first element)", optional=True)
    model_warning: str | None = figure("text", "what looks wrong with the model (it ends in a softmax), or None",
                                       optional=True)
    vocab_size: int | None = figure("count", "token-id inputs: the number of distinct ids fed", optional=True)
    vocab_size_source: str | None = figure("text", "where vocab_size came from (--vocab-size, the returned dict, "
                                                   "the task, the model's config or embedding)", optional=True)
