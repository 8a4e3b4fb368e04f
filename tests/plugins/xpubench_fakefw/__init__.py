"""FakeFW: a backend in one package, outside xpubench. It measures numpy matmuls and trains the workloads'
PyTorch models with a plain eager loop of its own (train.py), so the planner, the harness's measuring
loops, the results and the reports meet a backend none of them names."""

from __future__ import annotations

import numpy as np

from xpubench.backends.base import Backend
from xpubench.harness.matmul import MatmulOps, inputs_numpy


class FakeBackend(Backend):
    name = "fakefw"
    title = "FakeFW (a plugin)"
    module = None                   # nothing to import: always installed
    precisions = ("fp32",)
    matmul_dtypes = ("fp32",)
    startup_s = 2.0

    def family(self, backend: str) -> str:
        return "torch"              # it builds the workloads' PyTorch models

    def detect(self, host_cpu: dict) -> dict:
        from xpubench.devices.detect import cpu_device

        return {"version": "0.1", "devices": [cpu_device(host_cpu)]}

    def unsupported(self, case) -> str | None:
        if case.device != "cpu" or case.devices != 1:
            return "fakefw runs on one CPU only"
        return None

    def matmul_ops(self, case) -> MatmulOps:
        return MatmulOps(make_inputs=lambda n: inputs_numpy(n, case.seed), product=np.matmul,
                         sync=lambda out: None, to_numpy=lambda x: np.asarray(x, dtype=np.float64),
                         placement=lambda out: "cpu", tolerance=1e-4)

    def trainer(self, case, rank: int = 0, world: int = 1):
        from xpubench_fakefw.train import PlainTrainer

        return PlainTrainer(case, self)


BACKEND = FakeBackend()
