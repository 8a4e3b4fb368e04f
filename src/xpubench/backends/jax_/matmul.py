"""jnp.matmul under jax.jit. fp32 asks for Precision.HIGHEST (true fp32: the default on GPUs and TPUs
is TF32 / bf16 passes); tf32 asks for "tensorfloat32" (Precision.HIGH: TF32 on NVIDIA GPUs, the only
devices a tf32 case runs on; the training step traces its model under the same setting); bf16 and fp16
accumulate in fp32 (preferred_element_type) and round the output to the input dtype, as GPU and TPU
kernels do — on this CPU that is also ~3x faster than accumulating in bf16."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from xpubench.backends.jax_.device import DTYPES, jax_devices, placement
from xpubench.harness import matmul

TOLERANCE = {"fp32": 1e-4, "tf32": 1e-2, "bf16": 2e-2, "fp16": 5e-3}


def product_fn(precision: str):
    dtype = DTYPES[precision]
    if precision == "fp32":
        return lambda a, b: jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)
    if precision == "tf32":
        return lambda a, b: jnp.matmul(a, b, precision=jax.lax.Precision.HIGH)
    return lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.float32).astype(dtype)


def ops_for(case) -> matmul.MatmulOps:
    """The matmul adapters of a case (the benchmark's and ``xpubench doctor``'s)."""
    (device,) = jax_devices(case.device)
    dtype = DTYPES[case.precision]

    def make_inputs(n):
        a, b = matmul.inputs_numpy(n, case.seed)
        a, b = jax.device_put(a.astype(dtype), device), jax.device_put(b.astype(dtype), device)
        return a.block_until_ready(), b.block_until_ready()

    return matmul.MatmulOps(
        make_inputs=make_inputs,
        product=jax.jit(product_fn(case.precision)),   # first call compiles: part of "cold"
        sync=lambda out: out.block_until_ready(),
        to_numpy=lambda x: np.asarray(x.astype(jnp.float32), dtype=np.float64),
        placement=placement,
        tolerance=TOLERANCE[case.precision],
    )
