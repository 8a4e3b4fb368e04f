"""Load a user's model as a case's worker does (usermodel/load.py: import, call, check one forward pass,
count its FLOPs), without training it, in a process of its own (the Keras backend is chosen at import);
print what was found as one JSON line. Used by tests/test_usermodel_families.py.

    python tests/usermodel_probe.py FILE.py:FUNCTION BACKEND ['{"model_input": {...}}']

Besides the model's metrics it prints ``flops`` (forward FLOPs of one sample, or null) and, for a Keras
model, ``layer_flops``: an independent count from the layers' configurations (2 x the multiply-adds of
every Conv2D, DepthwiseConv2D and Dense layer at its output size).
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


def main(ref: str, backend: str, options: str = "{}") -> None:
    from xpubench.case import Case
    from xpubench.usermodel.load import load

    case = Case(workload=ref.rpartition(":")[2], backend=backend, device="cpu", mode="train", batch_size=32,
                options={"model": ref, **json.loads(options)})
    loaded = load(case)
    out = {**loaded.metrics(), "flops": loaded.flops, "vocab_size": loaded.spec.vocab_size}
    if loaded.framework == "keras":
        out["layer_flops"] = keras_layer_flops(loaded.model)
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:])
