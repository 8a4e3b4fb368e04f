"""JAX backend: matmul, training and inference adapters (CPU, GPU and TPU through PJRT); data parallel over
N devices (and processes) when ``case.devices`` > 1: the same Trainer and Session contracts on a device
mesh (``parallel.py``). JAX is imported only inside the methods."""

from __future__ import annotations

from xpubench.backends.base import Backend


class JaxBackend(Backend):
    name = "jax"

    def unsupported(self, case) -> str | None:
        if case.precision == "tf32":
            from xpubench.backends.jax_.device import jax_devices, tf32_unavailable

            return tf32_unavailable(jax_devices(case.device)[0])
        return None

    def matmul_ops(self, case):
        from xpubench.backends.jax_.matmul import ops_for

        return ops_for(case)

    def trainer(self, case, rank: int = 0, world: int = 1):
        if case.devices > 1:
            from xpubench.backends.jax_.parallel import ShardedJaxTrainer

            return ShardedJaxTrainer(case)
        from xpubench.backends.jax_.train import JaxTrainer

        return JaxTrainer(case)

    def session(self, case):
        if case.devices > 1:
            from xpubench.backends.jax_.parallel import ShardedSession

            return ShardedSession(case)
        from xpubench.backends.jax_.infer import JaxSession

        return JaxSession(case)

    def generator(self, case):
        from xpubench.backends.jax_.generate import generator_for

        return generator_for(case)

    def finish(self, case) -> None:
        if case.devices > 1:
            from xpubench.backends.jax_ import distributed

            distributed.shutdown()

    def doctor_ops(self, device: str):
        from xpubench.backends.jax_.doctor import doctor_ops

        return doctor_ops(device)


BACKEND = JaxBackend()
