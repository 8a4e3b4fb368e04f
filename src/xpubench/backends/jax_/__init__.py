"""JAX backend: matmul, training and inference adapters (CPU, GPU and TPU through PJRT); data parallel over
N devices (and processes) when ``case.devices`` > 1: the same Trainer and Session contracts on a device
mesh (``parallel.py``). JAX is imported only inside the methods."""

from __future__ import annotations

from xpubench.backends.base import Backend
from xpubench.devices.device import is_accelerator


def _attends(case) -> bool:
    """Whether the case's model runs jax.nn.dot_product_attention (the transformers: gpt, llama)."""
    from xpubench.workloads import REGISTRY, get_workload

    return case.workload in REGISTRY and get_workload(case.workload).kind == "transformer"


class JaxBackend(Backend):
    name = "jax"
    title = "JAX"
    module = "jax"
    imports = ("jax", "flax", "optax")
    packages = ("jax", "jaxlib", "flax", "optax")
    in_default_run = True
    precisions = ("fp32", "tf32", "bf16", "fp16", "int8", "int4")
    ceiling_dtypes = ("fp32", "tf32", "bf16", "fp16")
    ceiling_module = "xpubench.backends.jax_.ceiling"
    startup_s = 3.0          # measured on the project's 2-core CI VM: Python + jax's import
    preload = ("jax", "flax.linen", "optax")
    compile_s = 2.5          # one jitted step compiled ahead of time: 1.7-2.8 s measured for the CNN there

    def detect(self, host_cpu: dict) -> dict:
        from xpubench.backends.jax_.detect import detect

        return detect(host_cpu)

    def versions(self) -> dict:
        from xpubench.devices.detect import version_of

        return {"version": version_of("jax"), "jaxlib_version": version_of("jaxlib")}

    def worker_environment(self, device: str | None, environ, scratch=None) -> None:
        """JAX must not preallocate 75% of every visible GPU (unless the user set it; the fingerprint records
        it), and a CPU case sees no accelerator (JAX_PLATFORMS=cpu): it neither locks a TPU nor runs JAX's
        default-device work on a GPU."""
        environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        if device is not None and not is_accelerator(device):
            environ["JAX_PLATFORMS"] = "cpu"

    def warm_cache_note(self, environ) -> str | None:
        from xpubench.backends.jax_.device import warm_cache_note

        return warm_cache_note(environ)

    def data_parallel_hint(self, device: str) -> str:
        return (" (simulate N CPU devices with XLA_FLAGS=--xla_force_host_platform_device_count=N)"
                if not is_accelerator(device) else "")

    def compile_seconds(self, case) -> float:
        return self.compile_s * (3 if case.mode == "infer" else 2)   # train + eval step (+ predict)

    def unsupported(self, case) -> str | None:
        """tf32 off NVIDIA Ampere+ and fp16 on a TPU (devices/precisions.py) are skipped with the reason.
        The device is looked up after ``jax.distributed.initialize`` in a multi-process case: jax 0.10
        refuses to initialise once any call has started its backends ("must be called before any JAX
        computations"), and ``jax.devices()`` starts them. Joining also checks that every process runs
        this case (``distributed.join``)."""
        if case.devices > 1:   # join the cluster first (a no-op for one process), peers on this same case
            from xpubench.backends.jax_ import distributed

            distributed.join(case)
        if case.precision not in ("tf32", "fp16"):
            return None
        from xpubench.backends.jax_.device import precision_problem

        problem = precision_problem(first_device(case), case.precision)
        if problem is None and case.precision == "fp16" and _attends(case):
            from xpubench.backends.jax_.attention import dtype_problem

            problem = dtype_problem(first_device(case), "float16")   # XLA:CPU's fp16 attention
        return problem

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

    def gpu_identity(self, case) -> dict:
        from xpubench.backends.jax_.device import gpu_identity, jax_devices

        return gpu_identity(jax_devices(case.device)[0])

    def doctor_ops(self, device: str):
        from xpubench.backends.jax_.doctor import doctor_ops

        return doctor_ops(device)


def first_device(case):
    """The case's first JAX device (a data-parallel case's: the first of its mesh, looked up after
    ``distributed.join``)."""
    if case.devices > 1:
        from xpubench.backends.jax_.distributed import mesh_devices

        return mesh_devices(case.device, case.devices)[0]
    from xpubench.backends.jax_.device import jax_devices

    return jax_devices(case.device)[0]


BACKEND = JaxBackend()
