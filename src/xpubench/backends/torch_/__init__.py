"""PyTorch backend: matmul, training and inference adapters on one device; DistributedDataParallel training
over N processes when ``case.devices`` > 1 (``ddp.py`` starts the ranks). Torch is imported only inside
the methods, so listing backends imports no framework."""

from __future__ import annotations

from xpubench.backends.base import Backend, Unsupported
from xpubench.devices.device import GPU, MPS, is_cpu, kind_of
from xpubench.workloads.llama.options import DECODE_STEPS

# CPU instructions that make a half-precision matmul native (slow_cpu_dtypes)
NATIVE_HALF_FLAGS = {"bf16": ("avx512_bf16", "amx_bf16", "bf16"), "fp16": ("avx512_fp16", "amx_fp16", "fphp")}
NO_DDP_INFERENCE = ("data-parallel inference is not implemented for torch (DistributedDataParallel is a "
                    "training wrapper): run torch inference with --devices 1, or jax with --devices N")


class TorchBackend(Backend):
    name = "torch"
    title = "PyTorch"
    module = "torch"
    imports = ("torch",)
    packages = ("torch", "torchao")
    in_default_run = True
    precisions = ("fp32", "tf32", "bf16", "fp16", "int8", "int4")
    honours = ("decode",)   # llama's --decode: its generation's decode step, compiled or eager (generate.py)
    ceiling_dtypes = ("fp32", "tf32", "bf16", "fp16")
    ceiling_module = "xpubench.backends.torch_.ceiling"
    startup_s = 3.5          # measured on the project's 2-core CI VM: Python + torch's import
    preload = ("torch", "torch._dynamo")   # its compiler: also imported by torch.optim's first step
    compile_fallback = "compile=auto trains eager on this device"
    decode_steps = DECODE_STEPS   # --decode (generate.py), the default first: declared with llama's option
    under_load = ("PyTorch's CPU kernels (eager ops and Inductor's compiled ones) run on OpenMP threads that meet at "
                  "a barrier after each parallel kernel, spinning while they wait: while other processes hold the "
                  "cores, each barrier waits for a thread that is not running, so a decode step of many small "
                  "kernels slows several-fold (docs/workloads.md, \"The brief run\"); measure on a quiet machine.")
    compile_s = 30.0         # torch.compile of a CNN step: 18-33 s measured on CPU with a cold cache
    # torch.compile of a whole decode step, every layer traced and compiled: s, and s per layer, on a CPU with
    # the cold cache every worker starts with (caches.py); docs/workloads.md, "The brief run"
    decode_compile_s = (6.0, 1.8)

    def detect(self, host_cpu: dict) -> dict:
        from xpubench.backends.torch_.detect import detect

        return detect(host_cpu)

    def worker_environment(self, device: str | None, environ, scratch=None) -> None:
        """Inductor's and Triton's caches start empty in the worker's own folder (caches.py)."""
        if scratch is not None:
            from xpubench.backends.torch_.caches import use_fresh_caches

            use_fresh_caches(scratch, environ)

    def warm_cache_note(self, environ) -> str | None:
        from xpubench.backends.torch_.caches import warm_cache_note

        return warm_cache_note(environ)

    def slow_cpu_dtypes(self, env: dict, device: str) -> list[str]:
        """bf16/fp16 on a CPU without native instructions for them: torch's kernels then run at ~1 GFLOP/s
        (measured: torch 2.13 bf16 0.3-0.7, fp16 1.4 GFLOP/s on a Zen 2 with AVX2), so one 4096 product
        takes minutes. (XLA converts to fp32 internally and stays fast.)"""
        if not is_cpu(device):
            return []
        flags = set(env.get("host", {}).get("cpu", {}).get("flags") or [])
        return [d for d, native in NATIVE_HALF_FLAGS.items() if not flags.intersection(native)]

    def fp16_training_problem(self, env: dict, device: str) -> str | None:
        """fp16 training on MPS needs a GradScaler that runs there (devices/precisions.py)."""
        if kind_of(device) is not MPS:
            return None
        from xpubench.devices.precisions import mps_fp16_training_problem

        return mps_fp16_training_problem(env.get("backends", {}).get("torch", {}).get("version"))

    def data_parallel_devices(self, env: dict, device: str) -> int | None:
        """On a CPU, DistributedDataParallel runs one process per usable core (ddp.py)."""
        if not is_cpu(device):
            return None
        import os

        usable = env.get("host", {}).get("cpu", {}).get("usable_cores")   # the described machine's
        return usable or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)

    def compile_seconds(self, case) -> float:
        if case.mode == "generate":   # a compiled decode step (llama's --decode compiled)
            return self._decode_compile_s(case) if case.options.get("decode") == "compiled" else 0.0
        auto_gpu = case.compile == "auto" and kind_of(case.device) is GPU
        return self.compile_s if case.compile == "on" or auto_gpu else 0.0

    def _decode_compile_s(self, case) -> float:
        """A compiled decode step's estimate: ``decode_compile_s`` for the layers of the case's model (its
        spec's ``config.n_layers``), ``compile_s`` where the spec has none."""
        from xpubench.workloads import get_workload

        spec = get_workload(case.workload).spec_for(case.options)
        layers = getattr(getattr(spec, "config", None), "n_layers", None)
        base, per_layer = self.decode_compile_s
        return base + per_layer * layers if layers else self.compile_s

    def unsupported(self, case) -> str | None:
        if case.mode == "infer" and case.devices > 1:
            return NO_DDP_INFERENCE
        if case.precision == "tf32":
            from xpubench.backends.torch_.device import tf32_unavailable, torch_device

            return tf32_unavailable(torch_device(case.device))
        if case.precision == "fp16" and case.mode == "train" and kind_of(case.device) is MPS:
            import torch

            from xpubench.devices.precisions import mps_fp16_training_problem

            return mps_fp16_training_problem(torch.__version__)   # GradScaler on MPS: torch >= 2.8
        return None

    def matmul_ops(self, case):
        from xpubench.backends.torch_.matmul import ops_for

        return ops_for(case)

    def trainer(self, case, rank: int = 0, world: int = 1):
        if world > 1:
            from xpubench.backends.torch_.ddp import ddp_trainer

            return ddp_trainer(case, rank, world)
        from xpubench.backends.torch_.train import TorchTrainer

        return TorchTrainer(case)

    def launch(self, case, run):
        if case.devices == 1:
            return run(case)
        from xpubench.backends.torch_ import ddp

        return ddp.run(case, run)

    def session(self, case):
        if case.devices > 1:
            raise Unsupported(NO_DDP_INFERENCE)
        from xpubench.backends.torch_.infer import TorchSession

        return TorchSession(case)

    def generator(self, case):
        from xpubench.backends.torch_.generate import generator_for

        return generator_for(case)

    def gpu_identity(self, case) -> dict:
        from xpubench.backends.torch_.device import gpu_identity, torch_device

        return gpu_identity(torch_device(case.device))

    def doctor_ops(self, device: str):
        from xpubench.backends.torch_.doctor import doctor_ops

        return doctor_ops(device)


BACKEND = TorchBackend()
