"""The one construction every backend's inference session shares (the contract it fills:
harness/inference.py ``Session``): the backend's trainer on the case's fp32 training twin (trained
untimed, or its cached weights loaded), the workload's spec and forward FLOPs, the evaluation labels on
the host, and the key its trained weights are cached under (harness/weights.py: framework, code, data,
spec). A backend's session (``backends/*/infer.py``) says how to make its trainer, which framework it
is, what its training data is on the host, and converts to each precision."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from xpubench.harness import weights
from xpubench.workloads import get_workload


class TrainedSession:
    def __init__(self, case):
        self.case = case
        self.workload = get_workload(case.workload)
        self.trainer = self.make_trainer(dataclasses.replace(case, mode="train", precision="fp32"))
        self.spec = self.trainer.spec
        self.forward_flops = self.workload.forward_flops(self.spec)
        self.y_eval = self.host(self.trainer.y_eval)

    def make_trainer(self, case) -> Any:
        """The backend's trainer for ``case`` (the fp32 training twin of the inference case)."""
        raise NotImplementedError

    def host(self, array) -> np.ndarray:
        """An array of the framework's on the host, as numpy."""
        return np.asarray(array)

    def framework(self) -> str:
        """The framework and its version, part of the weights' key: "torch 2.5.1"."""
        raise NotImplementedError

    def training_data(self) -> tuple[np.ndarray, ...]:
        """The training inputs and labels on the host: their digest is part of the weights' key."""
        raise NotImplementedError

    def code_modules(self) -> tuple:
        """The backend's modules whose code shapes the trained weights (its training loop)."""
        return ()

    def key_extra(self) -> dict:
        from xpubench.harness import casedata, inference

        return {"framework": self.framework(),
                "code": weights.code_digest(*self.workload.sources, *self.code_modules(), casedata, inference),
                "data": weights.data_digest(*self.training_data()), "spec": repr(self.spec)}
