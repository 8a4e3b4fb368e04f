"""FLOPs of a user's model, measured on one forward pass of one sample (no analytic formula is known):

- torch (and Keras on torch): ``torch.utils.flop_counter.FlopCounterMode`` with formulas for the
  attention kernels it counts as 0 (torch_flops.py): the matmuls, convolutions and attention that ran,
  2 FLOPs per multiply-add; elementwise ops are not counted (as in the built-in workloads' formulas).
- flax (and Keras on jax): XLA's cost analysis of the compiled forward function
  (``jit(f).lower(...).compile().cost_analysis()["flops"]``): every HLO op, elementwise ones included,
  2 FLOPs per multiply-add in dots and convolutions; so it reads a few percent above a matmul-only count.
- Keras on tensorflow: none here (None, "n/a").

Where a counter is known to miss work, the figure is None ("n/a", with the reason), never a guess:
FlopCounterMode does not count torch's fused recurrent kernels (nn.LSTM / nn.GRU / nn.RNN: the built-in
imdb_lstm reads 200 FLOPs instead of 26.4M) nor any other multiply-add op without a formula (an FFT, a
quantized kernel: torch_flops.count names them), and XLA's cost analysis counts a loop's body once, not once
per iteration (a scan over 250 steps reads ~1/250 of the work). XLA also leaves out multiply-adds on
padding: the built-in ResNet-20 reads 75.8M against the formula's 81.1M, the MNIST CNN 4.34M against
4.42M; FlopCounterMode gives the formula's figures exactly for both.

Training FLOPs per sample are 3x the forward figure, the convention of the built-in workloads
(workloads/base.py). Each function returns (FLOPs per sample, the method as a phrase for the report). A
count that raises leaves the figure n/a with ``count_failed``'s reason; the model is measured all the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

TORCH_METHOD = "measured by torch FlopCounterMode (forward, 1 sample)"
XLA_METHOD = "measured by XLA cost analysis (forward, 1 sample)"
ANSI = re.compile(r"\x1b\[[0-9;]*m")   # Keras's bold markers around an exception's message


def torch_flops(call: Callable[[], Any], module: Any = None, weights: Any = None) -> tuple[float | None, str]:
    """FLOPs of ``call()`` (a forward pass of one sample of ``module``, whose ``weights`` are its
    parameters unless given), counted by torch_flops.count; None where the module holds a fused
    recurrent layer or a multiply-add op ran uncounted."""
    import torch

    from xpubench.usermodel import torch_flops as counting

    if module is not None and any(isinstance(m, torch.nn.RNNBase) for m in module.modules()):
        return None, "n/a (torch FlopCounterMode does not count nn.LSTM / nn.GRU / nn.RNN)"
    if weights is None:
        weights = module.parameters() if module is not None else ()
    counted = counting.count(call, weights)
    if counted.uncounted:
        return None, (f"n/a (torch FlopCounterMode has no formula for {_calls(counted.uncounted)}: their "
                      f"multiply-adds would be missing from the {counted.flops:,} FLOPs it counted)")
    if counted.formulas:
        return float(counted.flops), f"{TORCH_METHOD}; xpubench's formulas for {_calls(counted.formulas)}"
    return float(counted.flops), TORCH_METHOD


def _calls(ops: dict[str, int]) -> str:
    return ", ".join(f"{op} ({n} call{'s' if n > 1 else ''})" for op, n in sorted(ops.items()))


def count_failed(exc: BaseException) -> str:
    """The reason a FLOP count that raised leaves the figure n/a, in one line: the innermost exception
    (a framework's wrapper, such as Keras's "Exception encountered when calling ...", is skipped) and
    where it was raised."""
    import traceback

    root, seen = exc, {id(exc)}
    while (inner := root.__cause__ or root.__context__) is not None and id(inner) not in seen:
        root = inner
        seen.add(id(inner))
    lines = [ANSI.sub("", t).strip() for t in str(root).splitlines()]
    lines = [t for t in lines if t and not t.startswith("Exception encountered when calling")]
    frames = traceback.extract_tb(root.__traceback__)
    where = f" in {Path(frames[-1].filename).name}:{frames[-1].name}" if frames else ""
    said = f": {lines[0][:200]}" if lines else ""
    return f"n/a (the FLOP count failed{where}: {type(root).__name__}{said}; the case is measured without it)"


def xla_flops(fn: Callable, *args) -> tuple[float | None, str]:
    """XLA's count for ``jax.jit(fn)(*args)`` (a forward pass of one sample); None where the compiler
    reports no cost analysis."""
    import jax

    lowered = jax.jit(fn).lower(*args)
    if "while" in lowered.as_text():
        return None, "n/a (the model loops (scan / while): XLA's cost analysis counts a loop body once)"
    analysis = lowered.compile().cost_analysis()
    if isinstance(analysis, (list, tuple)):   # older jax: one dict per partition
        analysis = analysis[0] if analysis else None
    flops = (analysis or {}).get("flops")
    if flops is None or flops < 0:
        return None, "n/a (XLA reported no cost analysis)"
    return float(flops), XLA_METHOD


def keras_flops(keras: Any, model: Any, x1: Any) -> tuple[float | None, str]:
    """One sample through a built Keras model, counted by its backend's own means."""
    backend = keras.backend.backend()
    if backend == "torch":
        import torch

        if any(isinstance(layer, keras.layers.RNN) for layer in model._flatten_layers()):
            return None, "n/a (Keras's recurrent layers may run fused kernels FlopCounterMode does not see)"
        weights = [v.value for v in model.variables]   # a Keras model's parameters() on torch may be empty
        return torch_flops(lambda: model(torch.as_tensor(x1), training=False), model, weights)
    if backend == "jax":
        trainable = [v.value for v in model.trainable_variables]
        other = [v.value for v in model.non_trainable_variables]

        def forward(t, n, x):
            return model.stateless_call(t, n, x, training=False)[0]
        return xla_flops(forward, trainable, other, x1)
    return None, f"n/a (no FLOP counter for Keras on {backend} here)"
