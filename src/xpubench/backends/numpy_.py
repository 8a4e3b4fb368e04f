"""numpy: the CPU reference for matmul (BLAS through np.matmul). It has no training stack and no native
bf16/fp16 matmul, so it runs fp32 products only."""

from __future__ import annotations

import numpy as np

from xpubench.harness.outcome import Outcome
from xpubench.workloads import matmul


def ops_for(case) -> matmul.MatmulOps:
    """The matmul adapters of a case (the benchmark's and ``xpubench doctor``'s): fp32 only."""
    return matmul.MatmulOps(
        make_inputs=lambda n: matmul.inputs_numpy(n, case.seed),
        product=np.matmul,
        sync=lambda out: None,          # numpy returns only when the product is done
        to_numpy=lambda x: np.asarray(x, dtype=np.float64),
        placement=lambda out: "cpu",
        tolerance=1e-4,
    )


def run_case(case) -> Outcome:
    if case.mode != "matmul":
        return Outcome(status="skipped", message="numpy runs matmul only")
    if case.precision != "fp32":
        return Outcome(status="skipped", message=f"numpy has no native {case.precision} matmul")
    return matmul.measure(ops_for(case), case)
