"""numpy: the CPU reference for matmul (BLAS through np.matmul). It has no training stack and no native
bf16/fp16 matmul, so it runs fp32 products only."""

from __future__ import annotations

import numpy as np

from xpubench.backends.base import Backend
from xpubench.devices.device import is_cpu
from xpubench.harness import matmul


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


class NumpyBackend(Backend):
    name = "numpy"
    title = "NumPy"
    module = "numpy"
    imports = ("numpy",)
    packages = ("numpy",)
    in_default_run = True
    trains = False                   # the matmul reference only: no training stack
    matmul_dtypes = ("fp32",)        # no native bf16/fp16 matmul
    ceiling_dtypes = ("fp32",)
    ceiling_module = "xpubench.backends.numpy_ceiling"
    startup_s = 0.7

    def install_hint(self) -> str:
        return "pip install numpy"   # one of xpubench's own dependencies: no extra

    def detect(self, host_cpu: dict) -> dict:
        """numpy's version, its BLAS, and the host CPU as its device."""
        import numpy

        from xpubench.devices.detect import cpu_device

        blas = None
        try:
            deps = numpy.show_config(mode="dicts").get("Build Dependencies", {})
            info = deps.get("blas") or {}
            blas = " ".join(str(info[k]) for k in ("name", "version") if info.get(k)) or None
        except Exception:  # noqa: BLE001 - numpy < 1.26 has no mode='dicts'
            blas = None
        return {"version": numpy.__version__, "blas": blas, "devices": [cpu_device(host_cpu)]}

    def unsupported(self, case) -> str | None:
        if case.mode != "matmul":
            return "numpy runs matmul only"
        if case.precision != "fp32":
            return f"numpy has no native {case.precision} matmul"
        return None

    def matmul_ops(self, case) -> matmul.MatmulOps:
        return ops_for(case)

    def doctor_ops(self, device: str):
        return doctor_ops(device)


def doctor_ops(device: str):
    """``xpubench doctor``'s adapters for numpy: the CPU, synchronous, no compiler."""
    from xpubench.backends.base import DoctorOps
    from xpubench.case import Case
    from xpubench.devices import memory

    if not is_cpu(device):
        raise ValueError(f"numpy runs on the cpu only, not on {device}")
    return DoctorOps(
        matmul=lambda p: ops_for(Case(workload="matmul", backend="numpy", device="cpu", mode="matmul", precision=p)),
        asynchronous=False, allocate=lambda n: np.ones(n, dtype=np.uint8),
        memory_in_use=memory.host_current_bytes, peak=memory.HostPeak(),
        compile_check=lambda: {"what": "numpy", "skipped": "numpy has no compiler: nothing to check"})


BACKEND = NumpyBackend()
