"""torch.matmul on one device: fp32 (TF32 off), tf32, bf16 and fp16 inputs and outputs."""

from __future__ import annotations

import numpy as np
import torch

from xpubench.backends.torch_.device import DTYPES, placement, set_precision_mode, sync, torch_device
from xpubench.harness import matmul

TOLERANCE = {"fp32": 1e-4, "tf32": 1e-2, "bf16": 2e-2, "fp16": 5e-3}


def ops_for(case) -> matmul.MatmulOps:
    """The matmul adapters of a case (the benchmark's and ``xpubench doctor``'s)."""
    device = torch_device(case.device)
    set_precision_mode(case.precision)
    dtype = DTYPES[case.precision]
    torch.manual_seed(case.seed)

    def make_inputs(n):
        a, b = matmul.inputs_numpy(n, case.seed)
        a, b = torch.from_numpy(a).to(device, dtype), torch.from_numpy(b).to(device, dtype)
        sync(device)
        return a, b

    return matmul.MatmulOps(
        make_inputs=make_inputs,
        product=torch.matmul,
        sync=lambda out: sync(device),
        to_numpy=lambda t: t.detach().float().cpu().numpy().astype(np.float64),
        placement=placement,
        tolerance=TOLERANCE[case.precision],
    )
