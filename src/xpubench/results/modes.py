"""One record per mode (matmul, train, infer, generate): what a case of that mode measures and which of
its figures every reader ranks, folds and prints. Folding (results/fold.py), the derived figures
(analysis/), the terminal, the summary, the report, compare and the advice read ``MODES``; none of them
names a mode's metrics on its own. The measuring loop of each mode is launch/dispatch.py's LOOPS, keyed by
the same name.

A new mode: its metrics dataclass (as results/metrics_train.py holds TrainMetrics), one
``register(Mode(...))`` line (below, or in the module that adds the mode), its loop in launch/dispatch.py.
A name a Mode gives that its dataclass (or a shared group) does not declare fails at import.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from xpubench.results.metrics import REGISTRY, Metrics, declare
from xpubench.results.metrics_generate import GenerateMetrics
from xpubench.results.metrics_infer import InferMetrics
from xpubench.results.metrics_matmul import MatmulMetrics
from xpubench.results.metrics_serve import ServeMetrics
from xpubench.results.metrics_train import TrainMetrics


@dataclass(frozen=True)
class Figure:
    """A declared metric as a line shows it: ``before`` names it ("warm", "TTFT"), ``after`` is its unit as
    printed ("samples/s", "tok/s", "/batch"; FLOP/s carries its own). ``named_by``: the metric whose value
    is this figure's name (inference's quality: ``metric_name`` says accuracy or mse)."""

    metric: str
    before: str = ""
    after: str = ""
    named_by: str | None = None

    def name_in(self, metrics: Mapping[str, Any]) -> str | None:
        """The metric this figure reads in ``metrics`` (None when a ``named_by`` figure is unnamed there)."""
        if self.named_by is None:
            return self.metric
        name = metrics.get(self.named_by)
        return str(name) if name else None


@dataclass(frozen=True)
class Rate:
    """A rate derived from a time, as the case's figure is: ``work`` (the product of these metrics: FLOPs
    per product, samples per step, tokens per decode step) over ``time``, a metric that is the case's
    statistic of its samples (results/fold.py: the median of the process medians of the samples of that
    name, or of the processes' own figures). ``scaled``: rates that are a fixed multiple of this one
    (FLOP/s = FLOPs per sample x samples/s, tokens/s = tokens per sample x samples/s), kept at that
    multiple. A ratio of two such rates is the inverse ratio of their times, so the shown figures, the
    ratio, its interval and the winner all come from one statistic (docs/methodology.md)."""

    metric: str
    time: str
    work: tuple[str, ...]
    scaled: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return (self.metric, self.time, *self.work, *self.scaled)


def _present(metrics: Mapping[str, Any], name: str | None) -> bool:
    if name is None:
        return False
    value = metrics.get(name)
    return value is not None and not (isinstance(value, float) and math.isnan(value))  # NaN: a frame's gap


@dataclass(frozen=True)
class Mode:
    """Everything readers know about one mode. Metric names are those of ``metrics`` (or a shared group:
    efficiency, cost); ``samples`` are raw sample names (``<name>_s`` with ``<name>_ci95_low_s`` /
    ``<name>_ci95_high_s`` where the dataclass declares them)."""

    name: str                          # the case's mode
    metrics: type[Metrics]             # the dataclass its measuring loop fills
    label: str                         # how a sentence names it: "training"
    samples: tuple[str, ...]           # the raw samples of its headline time, the first one present wins
    headline: tuple[Figure, ...]       # its headline figure (summary, "vs best", answer, framework tables)
    higher_is_better: bool = True      # the headline's direction (its time is always lower-is-better)
    rates: tuple[Rate, ...] = ()       # the rates derived from a time (the headline's first): results/fold.py
    rounds: tuple[str, ...] = ()       # samples recorded step by step in the result's ``rounds`` equal runs:
                                       # the statistic reads each round's mean step (generation's decode)
    details: tuple[Figure, ...] = ()   # what a finished case's progress line adds after its headline
    cold: str | None = None            # the start-up figure a speedup compares (a time, or a rate)
    size: str = "batch_size"           # the case field a case is measured at ("size": matmul's N)
    size_text: tuple[str, str] = ("batch {}", "b{}")   # that field in a table's cell, long and short
    flop_rate: str | None = None       # achieved FLOP/s
    peak_share: str | None = None      # flop_rate / the chip's peak: "pct_of_peak" or "mfu"
    ranked: bool = False               # ranked against the measured ceiling (efficiency table, roofline)
    cost: Figure | None = None         # dollars per sample (the cost and energy table, the advice's ranking)
    priced: tuple[tuple[str, str], ...] = ()   # (cost figure, the figure it prices): a rate (per s: dollars
                                       # per 1M of it; FLOP/s: per PFLOP) or a time (s: dollars for it);
                                       # analysis/cost.py; the summary's cost is the first (report/tables/user_cost.py)
    bandwidth_bound: bool = False      # its headline is bound by memory bandwidth (decode): a run wants the
                                       # device's bandwidth whatever its precision (ceilings/runtime.py)
    keeps_cut: bool = False            # a worker stopped mid-case records what it measured until then (a
                                       # serving point's finished requests): the runner lets it (launch/supervise.py)

    def __post_init__(self) -> None:
        own = set(self.metrics.names())
        names = [*self.samples, *self.rounds, *(n for r in self.rates for n in r.names),
                 *(f.metric for f in self.headline + self.details if not f.named_by),
                 *(f.named_by for f in self.details if f.named_by), *(n for n in (self.flop_rate, self.cold) if n)]
        bad = [n for n in names if n not in own]
        bad += [n for n in (self.peak_share, self.cost.metric if self.cost else None) if n and n not in REGISTRY]
        if bad or not self.samples or not self.headline:
            raise TypeError(f"mode {self.name}: {', '.join(bad) or 'no samples or headline'} not declared by "
                            f"{self.metrics.__name__} ({self.metrics.__module__})")

    # ---- reading a result's figures (a metrics dict, a frame row, or a Result's samples) ----

    def headline_figure(self, metrics: Mapping[str, Any]) -> Figure | None:
        """The headline figure ``metrics`` carries (the first of ``headline`` present), or None."""
        return next((f for f in self.headline if _present(metrics, f.metric)), None)

    def sample_name(self, samples: Mapping[str, Any], names: tuple[str, ...] | None = None) -> str | None:
        """The first of ``names`` (default: the headline samples) with samples in ``samples``, or None."""
        return next((n for n in (names or self.samples) if len(samples.get(n) or []) > 0), None)

    def rate(self, metric: str | None) -> Rate | None:
        """The Rate ``metric`` comes from (itself, or scaled from it), None for a figure not derived from a time:
        its ``time`` names the samples whose interval tests a difference in ``metric``."""
        return next((r for r in self.rates if metric == r.metric or metric in r.scaled), None)

    def interval(self, metrics: Mapping[str, Any]) -> tuple[Any, Any, Any]:
        """(median, 95% low, 95% high) of the headline time: the first headline sample name's metrics."""
        prefix = self.samples[0][:-2]
        return tuple(metrics.get(n) for n in (self.samples[0], f"{prefix}_ci95_low_s", f"{prefix}_ci95_high_s"))

    def flops(self, metrics: Mapping[str, Any]) -> float | None:
        """The achieved FLOP/s, None where the mode or the result has none."""
        return metrics.get(self.flop_rate) if self.flop_rate else None

    def typed(self, metrics: Mapping[str, Any]) -> Metrics:
        """The mode's dataclass filled from a result's flat metrics (names of other groups left out): the
        declared, typed view of what travels as a JSON object (for a notebook: ``.step_s``, not ``["step_s"]``)."""
        own = set(self.metrics.names())
        return self.metrics(**{k: v for k, v in metrics.items() if k in own})


MODES: dict[str, Mode] = {}


def register(mode: Mode) -> Mode:
    """Add (or replace) a mode; its dataclass's metrics become declared (results/metrics.py REGISTRY)."""
    declare(mode.metrics)
    MODES[mode.name] = mode
    return mode


def mode_of(name: Any) -> Mode | None:
    """The record of a mode name (a case's ``mode``), None for a name no record declares."""
    return MODES.get(str(name)) if name is not None else None


SAMPLES_PER_S = Figure("samples_per_s", after="samples/s")

register(Mode("matmul", MatmulMetrics, "matmul", samples=("warm_s",), size="size", size_text=("N={}", "N={}"),
              headline=(Figure("warm_flops_per_s", before="warm"),), cold="cold_flops_per_s",
              details=(Figure("cold_flops_per_s", before="cold"),),
              rates=(Rate("warm_flops_per_s", "warm_s", ("flops_per_call",)),
                     Rate("cold_flops_per_s", "cold_s", ("flops_per_call",))),
              flop_rate="warm_flops_per_s", peak_share="pct_of_peak", ranked=True,
              priced=(("usd_per_pflop", "warm_flops_per_s"),)))
register(Mode("train", TrainMetrics, "training", samples=("step_s",),
              headline=(Figure("tokens_per_s", after="tok/s"), SAMPLES_PER_S), cold="first_epoch_s",
              rates=(Rate("samples_per_s", "step_s", ("global_batch",), ("tokens_per_s", "achieved_flops_per_s")),
                     Rate("epoch_samples_per_s", "epoch_s", ("global_batch", "steps_per_epoch"))),
              flop_rate="achieved_flops_per_s", peak_share="mfu", ranked=True,
              cost=Figure("usd_per_1m_samples", after="1M samples"),
              priced=(("usd_per_1m_samples", "samples_per_s"), ("usd_per_epoch", "epoch_s"),
                      ("usd_to_target", "time_to_target_s"))))
register(Mode("infer", InferMetrics, "inference", samples=("latency_s", "pass_s"), headline=(SAMPLES_PER_S,),
              rates=(Rate("samples_per_s", "pass_s", ("eval_samples",), ("achieved_flops_per_s",)),
                     Rate("batch_samples_per_s", "latency_s", ("batch",))),
              details=(Figure("latency_s", after="/batch"), Figure("metric", named_by="metric_name")),
              flop_rate="achieved_flops_per_s", peak_share="mfu", ranked=True,
              cost=Figure("usd_per_1m_predictions", after="1M predictions"),
              priced=(("usd_per_1m_predictions", "samples_per_s"),)))
register(Mode("generate", GenerateMetrics, "generation", samples=("decode_token_s",),
              headline=(Figure("decode_tokens_per_s", before="decode", after="tok/s"),),
              details=(Figure("ttft_s", before="TTFT"), Figure("decode_token_p50_s", after="/token")),
              rates=(Rate("decode_tokens_per_s", "decode_token_s", ("batch",), ("achieved_flops_per_s",)),
                     Rate("prefill_tokens_per_s", "prefill_s", ("batch", "prompt_len"))),
              rounds=("decode_token_s",), flop_rate="achieved_flops_per_s", peak_share="mfu", bandwidth_bound=True,
              priced=(("usd_per_1m_tokens", "decode_tokens_per_s"),
                      ("usd_per_1m_prompt_tokens", "prefill_tokens_per_s"))))
# xpubench serve (src/xpubench/serve/, docs/serving.md)
register(Mode("serve", ServeMetrics, "serving", samples=("e2e_s",), size="users", size_text=("{} users", "c{}"),
              headline=(Figure("output_tokens_per_s", before="output", after="tok/s"),),
              details=(Figure("ttft_p90_s", before="TTFT p90"), Figure("tpot_p90_s", before="TPOT p90")),
              keeps_cut=True))
