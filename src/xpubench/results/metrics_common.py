"""The figures any case may carry, whatever its mode (results/metrics.py; every mode's group extends
``Common``, and so does a serving point's, results/metrics_serve.py): why a figure should not be trusted, a
failure's type and traceback, how the framework compiled and tuned, the memory high-water mark, and the
selftest workload's figures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xpubench.results.metric_base import Metrics, figure


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
