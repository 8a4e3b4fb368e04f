"""An engine: a runtime that loads its own model and times itself (llama.cpp's llama-bench, OpenVINO GenAI's
LLMPipeline, MLX-LM's generate loop), beside the frameworks whose loops live in harness/.

A framework (torch, jax, keras) hands the harness adapters and the harness times them. An engine is asked
for two things, and the generation case is measured through them (harness/engine.py):

- ``load(weights, fmt, device)``: the model in one of its weight formats (``formats``: xpubench's precision name ->
  the engine's own), converted from a Hugging Face checkpoint folder (``Weights``, workloads/base.py: what
  a workload's ``checkpoint`` hook hands over) and kept in xpubench's cache by the checkpoint's digest, the
  format and the converter's versions, untimed;
- ``bench(model, prompt_len, new_tokens, depth, batch, budget_s)``: its own timing of a prefill of
  ``prompt_len`` tokens after ``depth`` cached ones and of ``new_tokens - 1`` decode steps, as (metrics,
  raw samples) named as the generation loop names its own (``prefill_s``, ``decode_token_s``, ...).

Its server, where it has one, is serving's part of the record (``xpubench serve``; docs/serving.md), not this
interface's.

The record says which workloads it runs (``supports``: a generating workload with a ``checkpoint`` hook)
and why a case can't run (``cannot_load``, asked at plan time: a format it lacks, a checkpoint its format
can't hold; ``unsupported``: the rest, in the worker), so no workload's name is checked anywhere and no loop
has an escape hatch.

Adding an engine (docs/architecture.md, "Adding an engine"): a package ``backends/<name>_/`` whose
``BACKEND`` is an ``Engine`` subclass with ``formats``, ``load`` and ``bench``, plus one
line in ``backends.REGISTRY``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from xpubench.backends.base import Backend, Unsupported
from xpubench.workloads.base import Weights


def usable_threads() -> int:
    """The cores this process may use: an engine's threads, as torch's and JAX's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Engine(Backend):
    """The record of a runtime that loads its own model and times itself (module docstring)."""

    kind = "engine"
    formats: Mapping[str, str] = MappingProxyType({})   # xpubench precision -> the engine's name of the format
    matmul_dtypes = ()
    ceiling_dtypes = ()

    @property
    def precisions(self) -> tuple[str, ...]:   # type: ignore[override] - the formats are its precisions
        return tuple(self.formats)

    def lacks(self, precision: str) -> str | None:
        """Why it has no ``precision`` weights (the formats it has), or None."""
        if precision in self.formats:
            return None
        return (f"{self.name} has no {precision} format ({self.title}'s: "
                f"{', '.join(f'{p} ({own})' for p, own in self.formats.items())})")

    def cannot_load(self, weights: Weights, fmt: str) -> str | None:
        """Why ``weights`` can't be made into format ``fmt`` (one it lacks; a shape the format can't hold),
        or None. The plan asks before anything runs (plan/engines.py): ``weights``' folder may not be written
        yet, its config and digest are."""
        return self.lacks(fmt)

    def supports(self, workload, backend: str | None = None) -> bool:
        """A workload that generates and hands over its weights as a checkpoint folder (its ``checkpoint``)."""
        return workload.generates and workload.checkpoint is not None

    def unsupported(self, case) -> str | None:
        if case.mode != "generate":
            return f"{self.title} runs generation only: train with torch or jax"
        if case.devices > 1:
            return f"{self.title} runs a case on one device"
        return self.lacks(case.precision) or self.unavailable(case)

    def unavailable(self, case) -> str | None:
        """Why this case can't run here beyond its mode and format (a device, a batch, a missing program)."""
        return None

    def load(self, weights: Weights, fmt: str, device: str = "cpu") -> Any:
        """The model of ``weights`` in format ``fmt`` (a key of ``formats``), converted unless cached, loaded
        on ``device`` (an xpubench device id)."""
        raise Unsupported(f"{self.name} loads no model")

    def bench(self, model: Any, *, prompt_len: int, new_tokens: int, depth: int, batch: int,
              budget_s: float | None) -> tuple[dict, dict]:
        """(metrics, raw samples) of its own timing of the loaded ``model`` (module docstring)."""
        raise Unsupported(f"{self.name} times nothing")
