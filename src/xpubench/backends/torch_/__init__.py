"""PyTorch backend: matmul, training and inference adapters on one device; DistributedDataParallel training
over N processes when ``case.devices`` > 1 (``ddp.py`` starts the ranks). Torch is imported only inside
the methods, so listing backends imports no framework."""

from __future__ import annotations

from xpubench.backends.base import Backend, Unsupported

NO_DDP_INFERENCE = ("data-parallel inference is not implemented for torch (DistributedDataParallel is a "
                    "training wrapper): run torch inference with --devices 1, or jax with --devices N")


class TorchBackend(Backend):
    name = "torch"

    def unsupported(self, case) -> str | None:
        if case.mode == "infer" and case.devices > 1:
            return NO_DDP_INFERENCE
        if case.precision == "tf32":
            from xpubench.backends.torch_.device import tf32_unavailable, torch_device

            return tf32_unavailable(torch_device(case.device))
        if case.precision == "fp16" and case.mode == "train" and case.device == "mps":
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
