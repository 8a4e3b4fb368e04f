"""The one record a backend is: every fact about a framework lives on its ``Backend`` (names and variants,
detection, precisions and their gates, estimates, the packages a fingerprint records, the worker's
environment, the ceiling and doctor adapters, which workloads it builds and how) and nowhere else.

A backend supplies adapters -- the matmul ops, a Trainer, an inference Session, a generator, how a
data-parallel case's processes start -- and never a measuring loop: launch/dispatch.py picks the loop by
the case's mode and feeds it these (the scenario / backend / launcher split of optimum-benchmark).
Framework imports stay inside the methods, so listing, planning and reporting import no framework.

A backend id may carry a variant after a colon: ``keras:jax`` is the keras backend running on Keras's
jax backend; the methods that depend on it take the id.

An engine (llama.cpp, OpenVINO GenAI, MLX-LM) is the other kind of backend: it loads its own model and times
itself; its record is an ``Engine`` (backends/engine.py).

Adding a backend: a package ``backends/<name>_/`` whose ``__init__.py`` defines ``BACKEND`` (an instance
of a Backend subclass that sets its facts and implements the adapters it has; the others say
"unsupported", so such cases are skipped with that reason), plus one line in ``backends.REGISTRY`` (or,
for a backend shipped outside xpubench, an ``xpubench.backends`` entry point: docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from xpubench.backends.serverspec import ServerSpec


class Unsupported(Exception):
    """A case this backend can't run here (the case is recorded as skipped with this reason)."""


class Backend:
    """A framework's record. The class attributes are its facts; the methods its gates and adapters."""

    name = ""                       # the id users type (-b torch) and results record
    kind = "framework"              # "framework": the harness's loops time its adapters; "engine": it loads
    #                                 its own model and times itself (backends/engine.py)
    title = ""                      # how reports name it ("PyTorch")
    module: str | None = None       # the import whose presence means "installed" (None: always installed)
    imports: tuple[str, ...] = ()   # every top-level module its workers import beyond xpubench's own dependencies:
    #   one not found here is said by `env`, `doctor` and the plan, with ``install_hint`` (backends/detect.py
    #   ``missing_imports``); tests/test_backend_imports.py checks it against the imports of its code
    packages: tuple[str, ...] = ()  # distributions every result's fingerprint records the versions of
    in_default_run = False          # planned when no -b is given
    variants: tuple[str, ...] = ()  # keras: the frameworks it runs on (ids keras:jax, keras:torch, ...)
    trains = True                   # has model cases at all (numpy: matmul only)
    matmul_dtypes: tuple[str, ...] = ("fp32", "bf16", "fp16")   # its default matmul sweep, before gates
    ceiling_dtypes: tuple[str, ...] = ()    # the precisions ``xpubench ceilings`` can search
    ceiling_module: str | None = None       # the module with gemm_ops(device, precision), stream_ops(device)
    startup_s = 3.0                 # estimate: a worker's start, import and set-up (plan/estimate.py)
    preload: tuple[str, ...] = ()   # what a fork server imports once for its workers (launch/forkserver.py)
    compile_s = 0.0                 # estimate: one step's ahead-of-time compile, where the backend compiles
    compile_fallback: str | None = None   # what its runs do when compiling fails (None: the case fails)
    decode_steps: tuple[str, ...] = ()   # the decode steps a run may choose, its default and best first (torch:
                                         # compiled, eager); a result of another is labelled (``variant``)
    precisions: tuple[str, ...] = ("fp32",)  # every precision its cases can run
    under_load: str | None = None   # why its figures fall further than others' on a busy machine (llama.cpp's
    #                                 spinning threads): the report says so beside a result of a busy run
    models: Mapping[str, Any] = MappingProxyType({})   # its own builders for workloads (name -> builder(spec))
    honours: tuple[str, ...] = ()   # the workloads' backend options its loops read (torch: llama's "decode"):
    #   only its cases carry them (plan._cases_for), so another backend's key never names a choice it ignores

    # ---- names ------------------------------------------------------------------------------------

    def variant(self, step: Any) -> str | None:
        """The words a result of this backend is labelled with wherever it is compared (report/base/frame.py
        ``backend_label``: "torch (eager decode)"): its decode step (``step``: the result's ``decode_step``,
        "eager" or "compiled (...)", else the case's --decode) where it is one of ``decode_steps`` other than
        the default; None for the default, or a backend that offers no choice (JAX's step is always jitted)."""
        chosen = next((s for s in self.decode_steps if str(step or "").startswith(s)), None)
        return f"{chosen} decode" if chosen and chosen != self.decode_steps[0] else None

    def ids(self, env: dict | None = None) -> list[str]:
        """The backend ids this record stands for: its name, or with variants each ``name:variant``
        (only those installed in ``env`` when given)."""
        found = [f"{self.name}:{v}" for v in self.variants] or [self.name]
        return [b for b in found if env is None or self.installed(env, b)]

    def family(self, backend: str) -> str:
        """The key of a workload's ``models`` this backend builds (keras:jax builds the "keras" model)."""
        return self.name

    def device_backend(self, backend: str) -> str:
        """The backend whose detected devices a case of ``backend`` runs on (its own; keras:jax: jax's)."""
        return self.name

    # ---- detection and the environment record ---------------------------------------------------------

    def installed(self, env: dict, backend: str) -> bool:
        """Whether ``backend`` can run here, from an environment record (this machine's or another's)."""
        return bool((env.get("backends", {}).get(self.name) or {}).get("installed"))

    def install_hint(self) -> str:
        """The command that installs what its workers import (its extra of xpubench's pyproject.toml)."""
        return f'pip install "xpubench[{self.name}]"'

    def missing(self, env: dict) -> str | None:
        """Why its cases can't run here although it is installed: the modules of ``imports`` the environment
        record found missing (``"missing_imports"``), and how to install them; None when none is."""
        absent = (env.get("backends", {}).get(self.name) or {}).get("missing_imports") or []
        if not absent:
            return None
        return (f"{self.name}'s workers import {', '.join(absent)}, which {'is' if len(absent) == 1 else 'are'} "
                f"not installed here: {self.install_hint()}")

    def detect(self, host_cpu: dict) -> dict:
        """This framework's record for the environment: {"version", "devices": [...], ...}. Runs in the
        detection child (backends/detect.py), which imports the framework; never in the parent."""
        return {"version": None, "devices": []}

    def versions(self) -> dict:
        """The version fields of ``detect``'s record, read from the installed distributions without importing
        the framework: the record of a backend a plan does not use (backends/detect.py ``environment``)."""
        from xpubench.devices.detect import version_of

        return {"version": version_of(self.module or self.name)}

    def worker_environment(self, device: str | None, environ, scratch=None) -> None:
        """Settings made in ``environ`` before any framework is imported: in a case's worker process
        (``device`` the case's, ``scratch`` the worker's own folder; launch/worker.py applies every
        backend's) and in the detection child (``device`` None)."""

    def warm_cache_note(self, environ) -> str | None:
        """Why a compile time measured in this process may include cache hits (None: cold compiles)."""
        return None

    # ---- precisions and their gates -------------------------------------------------------------------

    def default_matmul_dtypes(self, env: dict, backend: str, device: str) -> list[str]:
        """The matmul sweep on ``device`` when no -p is given (plan/defaults.py applies the chip's gates)."""
        return list(self.matmul_dtypes)

    def slow_cpu_dtypes(self, env: dict, device: str) -> list[str]:
        """Half dtypes this framework computes slowly on this CPU (left out of default sweeps)."""
        return []

    def fp16_training_problem(self, env: dict, device: str) -> str | None:
        """Why fp16 training (autocast + loss scaling) cannot run here with this framework, or None."""
        return None

    def data_parallel_devices(self, env: dict, device: str) -> int | None:
        """How many devices of this kind data parallelism can use on one host (None: those detected)."""
        return None

    def data_parallel_hint(self, device: str) -> str:
        """What to say when --devices asks for more than there are."""
        return ""

    # ---- estimates ---------------------------------------------------------------------------------------

    def preload_modules(self, backend: str) -> tuple[str, ...]:
        """The modules a fork server imports for the workers of ``backend`` (an id: keras:jax)."""
        return self.preload

    def startup_seconds(self, backend: str) -> float:
        """Estimated start of a worker of ``backend``: Python, the framework's import, set-up."""
        return self.startup_s

    def compile_seconds(self, case) -> float:
        """Estimated ahead-of-time compile time of a case (plan/estimate.py)."""
        return 0.0

    # ---- workloads -------------------------------------------------------------------------------------

    def supports(self, workload, backend: str | None = None) -> bool:
        """Whether this backend has a model for ``workload`` (a workloads.base.Workload): the workload
        declares one for its family, or the backend brings its own."""
        return self.family(backend or self.name) in workload.models or workload.name in self.models

    def build(self, workload, spec, backend: str | None = None) -> Any:
        """The model of ``workload`` for ``spec``: the backend's own builder, else the workload's."""
        builder = self.models.get(workload.name) or workload.models[self.family(backend or self.name)]
        return builder(spec)

    # ---- adapters (harness protocols) --------------------------------------------------------------------

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

    def server(self) -> ServerSpec | None:
        """How this engine's OpenAI-compatible server starts (serve/server.py starts, watches and stops it;
        a ``serve`` case of this backend is a point of load against it), or None: it has none. Where its
        program is not here, the spec says why (``missing``): what it answers is still known (a --url)."""
        return None

    def finish(self, case) -> None:
        """Tear down what the case set up (a multi-process runtime); called after the measurement."""

    def gpu_identity(self, case) -> dict:
        """{"vendor": "nvidia" | "amd" | None, "uuid": str | None} of the case's GPU, as the framework running
        it sees it (called after the framework initialised the device): the energy meter reads that board."""
        return {"vendor": None, "uuid": None}

    def doctor_ops(self, device: str) -> Any:
        """``xpubench doctor``'s adapters (DoctorOps below)."""
        raise Unsupported(f"{self.name} has no doctor adapters")

    def ceiling_ops(self):
        """The module whose gemm_ops(device, precision) and stream_ops(device, bytes) ``xpubench ceilings``
        measures with (harness/ceiling.py, harness/bandwidth.py); None where it has none."""
        import importlib

        return importlib.import_module(self.ceiling_module) if self.ceiling_module else None


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
