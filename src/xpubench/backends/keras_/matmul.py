"""``keras.ops.matmul`` on one device, as a Keras user calls it: eagerly (each call dispatches through
Keras's op layer to the backend's matmul: ``jnp.matmul`` outside any jit on jax, ``torch.matmul`` on
torch), inputs of the case's dtype, output in it. fp32 is true fp32 (jax's default matmul precision set
to "highest", TF32 off in torch), as in the native backends. The measurement is harness/matmul.py's."""

from __future__ import annotations

import numpy as np

from xpubench.backends.keras_.device import KerasDevice, import_keras, keras_backend_of, set_precision
from xpubench.backends.torch_.matmul import TOLERANCE
from xpubench.harness import matmul

DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def ops_for(case) -> matmul.MatmulOps:
    """The matmul adapters of a case: keras.ops.matmul on the case's Keras backend."""
    backend = keras_backend_of(case)
    keras = import_keras(backend)
    device = KerasDevice(keras, backend, case.device)
    set_precision(keras, backend, case.precision)
    dtype = DTYPES[case.precision]

    def make_inputs(n):
        a, b = matmul.inputs_numpy(n, case.seed)
        with device.scope():
            a, b = keras.ops.cast(a, dtype), keras.ops.cast(b, dtype)
        device.sync((a, b))
        return a, b

    def product(a, b):
        with device.scope():
            return keras.ops.matmul(a, b)

    return matmul.MatmulOps(
        make_inputs=make_inputs,
        product=product,
        sync=device.sync,
        to_numpy=lambda x: keras.ops.convert_to_numpy(keras.ops.cast(x, "float32")).astype(np.float64),
        placement=device.placement,
        tolerance=TOLERANCE[case.precision],
    )

