"""Load users' models as a case's worker does (usermodel/load.py: import, call, check one forward pass,
count its FLOPs), without training them, in a process of their own (the Keras backend is chosen at
import: the Keras models of one call share one Keras backend); print what was found for each model as
one JSON line, in the order given. Used by tests/test_usermodel_families.py.

    python tests/usermodel_probe.py FILE.py:FUNCTION BACKEND [FILE.py:FUNCTION BACKEND ...]

Besides the model's metrics it prints ``flops`` (forward FLOPs of one sample, or null) and an independent
count: for a Keras model ``layer_flops``, from the layers' configurations (2 x the multiply-adds of every
Conv2D, DepthwiseConv2D and Dense layer at its output size); for a Hugging Face model
``eager_attention_flops``, FlopCounterMode's count of the same model with eager attention, where every
attention matmul is an aten.bmm the counter sees (on the meta device: shapes only).
"""

from __future__ import annotations

import json
import sys


def keras_layer_flops(model) -> int:
    import keras

    total = 0
    for layer in model._flatten_layers(include_self=False):
        if isinstance(layer, keras.layers.DepthwiseConv2D):
            _, h, w, c = layer.output.shape
            total += 2 * h * w * c * layer.kernel_size[0] * layer.kernel_size[1]
        elif isinstance(layer, keras.layers.Conv2D):
            _, h, w, c = layer.output.shape
            total += 2 * h * w * c * layer.kernel_size[0] * layer.kernel_size[1] * layer.input.shape[-1] // layer.groups
        elif isinstance(layer, keras.layers.Dense):
            total += 2 * layer.input.shape[-1] * layer.units
    return total


def eager_attention_flops(model, input_shape) -> int:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    model.eval().set_attn_implementation("eager")
    model.to("meta")   # the counter counts from shapes: no weights, no arithmetic (a BERT-base forward, ~1 s)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, *input_shape, dtype=torch.int32, device="meta"))
    return counter.get_total_flops()


def probe(ref: str, backend: str) -> dict:
    from xpubench.case import Case
    from xpubench.usermodel.load import load

    case = Case(workload=ref.rpartition(":")[2], backend=backend, device="cpu", mode="train", batch_size=32,
                options={"model": ref})
    loaded = load(case)
    out = {**loaded.metrics(), "flops": loaded.flops, "vocab_size": loaded.spec.vocab_size}
    if loaded.framework == "keras":
        out["layer_flops"] = keras_layer_flops(loaded.model)
    if hasattr(loaded.model, "set_attn_implementation"):   # after the worker's count: it changes the model
        out["eager_attention_flops"] = eager_attention_flops(loaded.model, loaded.spec.input_shape)
    return out


def main(*args: str) -> None:
    for ref, backend in zip(args[::2], args[1::2], strict=True):
        print(json.dumps(probe(ref, backend)), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
