"""The one interface a backend implements. A backend supplies adapters -- the matmul ops, a Trainer, an
inference Session, a generator, how a data-parallel case's processes start -- and never a measuring
loop: harness/dispatch.py picks the loop by the case's mode and feeds it these (the scenario / backend /
launcher split of optimum-benchmark). Framework imports stay inside the methods of each backend package.

Adding a backend: a package ``backends/<name>_/`` whose ``__init__.py`` defines ``BACKEND`` (an instance
of a Backend subclass), plus one line in ``backends.REGISTRY``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class Unsupported(Exception):
    """A case this backend can't run here (the case is recorded as skipped with this reason)."""


class Backend:
    name = ""

    def unsupported(self, case) -> str | None:
        """Why this case can't run with this backend here (recorded as skipped), or None. Checked before
        any adapter is built."""
        return None

    def matmul_ops(self, case) -> Any:
        """harness.matmul.MatmulOps for a matmul case."""
        raise Unsupported(f"{self.name} runs no matmul")

    def trainer(self, case, rank: int = 0, world: int = 1) -> Any:
        """A harness.training.Trainer; with ``world`` > 1, rank ``rank``'s (``launch`` starts the ranks)."""
        raise Unsupported(f"{self.name} has no training stack")

    def session(self, case) -> Any:
        """A harness.inference.Session for an inference case."""
        raise Unsupported(f"{self.name} has no inference path")

    def generator(self, case) -> Any:
        """A harness.generation Generator for a generation case."""
        raise Unsupported(f"{self.name} has no generation path")

    def launch(self, case, run: Callable[..., Any]) -> Any:
        """Run ``run(case, rank=0, world=1)`` in the processes the case needs and return the outcome of
        the first rank here. One process (the worker) unless the backend starts ranks of its own."""
        return run(case)

    def finish(self, case) -> None:
        """Tear down what the case set up (a multi-process runtime); called after the measurement."""

    def gpu_identity(self, case) -> dict:
        """{"vendor": "nvidia" | "amd" | None, "uuid": str | None} of the case's GPU, as the framework running
        it sees it (called after the framework initialised the device): the energy meter reads that board."""
        return {"vendor": None, "uuid": None}

    def doctor_ops(self, device: str) -> Any:
        """``xpubench doctor``'s adapters (doctor/probe.py DoctorOps)."""
        raise Unsupported(f"{self.name} has no doctor adapters")


@dataclass
class DoctorOps:
    """What a backend supplies for ``xpubench doctor`` (``Backend.doctor_ops(device_id)``; doctor/probe.py
    drives them)."""

    matmul: Callable[[str], Any]                 # precision -> harness.matmul.MatmulOps of the benchmark
    asynchronous: bool                           # calls return before the device has done the work
    allocate: Callable[[int], Any]               # n bytes on the device, written, kept alive by the caller
    memory_in_use: Callable[[], int | None]      # bytes in use on the device now (host RSS for a CPU)
    peak: Any                                    # the benchmark's peak-memory counter: reset(), read()
    compile_check: Callable[[], dict]            # {"what", "seconds"} or {"what", "skipped": why}
    event_window: Callable[[Callable[[], Any], int], tuple[float, float]] | None = None  # CUDA: (event s, wall s)
