"""MLX-LM: an engine for a language model's generation (``-b mlx``), on Apple silicon's GPU (Metal) and
on any CPU MLX has a build for (``mlx[cpu]`` on Linux x86-64).

MLX-LM loads the workload's checkpoint folder as it is (``mlx_lm.utils.load_model``: no conversion, no
cache) and casts or quantises it to the case's format as ``mlx_lm.convert`` does (model.py); its own
decode loop, ``mlx_lm.generate.generate_step``, is timed at each token it hands back (model.py: what
``mlx_lm.generate``'s and ``mlx_lm.benchmark``'s figures are made of). Formats: fp32, bf16, fp16 (MLX
float32, bfloat16, float16) and int8, int4 (MLX's affine quantisation: int8 in MLX-LM's default groups of
64, int4 in the case's int4 group size).

Devices (the Apple GPU path): ``cpu`` is MLX's ``mx.cpu``; where ``mx.metal.is_available()`` the Apple GPU
is xpubench's ``mps`` device and runs on ``mx.gpu`` (Metal), each case choosing its device with
``mx.set_default_device`` and running MLX-LM's loop on a stream of that device. The accelerator check
(scripts/accelerator_check.sh) runs its llama step with ``-b mlx`` where it finds the Apple GPU.
"""

from __future__ import annotations

from types import MappingProxyType

from xpubench.backends.engine import Engine, Weights
from xpubench.devices.device import CPU, MPS, kind_of

GROUP_SIZES = (32, 64, 128)   # the group sizes MLX's affine quantisation takes


class MlxBackend(Engine):
    name = "mlx"
    title = "MLX-LM"
    module = "mlx_lm"
    imports = ("mlx", "mlx_lm")
    packages = ("mlx", "mlx-lm")
    formats = MappingProxyType({"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "int8": "q8 affine",
                                "int4": "q4 affine"})
    startup_s = 2.0

    def detect(self, host_cpu: dict) -> dict:
        """MLX-LM's and MLX's versions, the host CPU, and the Apple GPU where Metal is available (xpubench's ``mps``)."""
        import mlx.core as mx

        from xpubench.devices import records
        from xpubench.devices.detect import cpu_device

        devices = [cpu_device(host_cpu)]
        if mx.metal.is_available():
            info = mx.device_info(mx.gpu)   # its keys "depend on the backend": total_memory or memory_size
            devices.append(records.mps(host_cpu, info.get("memory_size") or info.get("total_memory")))
        return {**self.versions(), "mlx": mx.__version__, "devices": devices}   # MLX-LM's version, as ``versions``

    def install_hint(self) -> str:
        return 'pip install "xpubench[mlx]"'

    def unavailable(self, case) -> str | None:
        if kind_of(case.device) not in (CPU, MPS):
            return f"MLX runs on the CPU and the Apple GPU (mps); {case.device} is neither"
        if case.batch_size > 1:
            return "xpubench times MLX-LM's generate_step, one sequence at a time (batch 1)"
        return None

    def cannot_load(self, weights: Weights, fmt: str) -> str | None:
        if fmt == "int4" and weights.int4_group not in GROUP_SIZES:
            return (f"MLX quantises in groups of {', '.join(map(str, GROUP_SIZES))} weights; int4_group_size "
                    f"{weights.int4_group} has no MLX format")
        return self.lacks(fmt)

    def load(self, weights: Weights, fmt: str, device: str = "cpu"):
        from xpubench.backends.mlx_.model import load

        return load(weights, fmt, device)

    def bench(self, model, *, prompt_len: int, new_tokens: int, depth: int, batch: int,
              budget_s: float | None) -> tuple[dict, dict]:
        from xpubench.backends.mlx_.model import bench

        return bench(model, prompt_len, new_tokens, depth, budget_s)


BACKEND = MlxBackend()
