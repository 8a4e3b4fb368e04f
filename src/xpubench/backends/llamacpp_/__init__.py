"""llama.cpp: a runtime beside torch and JAX for the llama workload's generation (``-b llamacpp``).

Its cases are the llama workload's generation cases, measured by llama.cpp's own ``llama-bench`` on a
GGUF of the same weights (gguf_file.py), read back from its JSON output (bench.py) and recorded with
the same figures and the same bandwidth bound as torch's and JAX's, so the pp/tg table shows the three
runtimes side by side. Formats: fp32, bf16, fp16 (GGUF F32, BF16, F16), int8 (q8_0), int4 (q4_0).

The programs come from xpubench's cached build of the pinned llama.cpp (scripts/build_llamacpp.sh),
``$XPUBENCH_LLAMACPP_DIR`` or PATH (binaries.py); where none is found the cases are skipped with that
reason. Without the ``gguf`` package (its ``imports``) the plan refuses them, with ``pip install
"xpubench[llamacpp]"`` (plan/defaults.py ``backend_problem``). The build's
version, commit and CMake flags are in the environment record, so in every result's fingerprint.
"""

from __future__ import annotations

from xpubench.backends.base import Backend, Unsupported
from xpubench.devices.device import CPU, kind_of


class LlamaCppBackend(Backend):
    name = "llamacpp"
    title = "llama.cpp"
    module = None                    # a program, not an import: detect() says whether it was found
    imports = ("gguf",)              # its GGUF is written with gguf-py (gguf_file.py)
    packages = ("gguf",)
    precisions = ("fp32", "bf16", "fp16", "int8", "int4")
    matmul_dtypes = ()
    startup_s = 1.0                  # llama-bench loads a GGUF by mmap; writing one is cached (gguf_file.py)
    under_load = ("llama.cpp's threads meet at a barrier after every operation of every token, spinning while "
                  "they wait (llama-bench's --poll 50): while other processes hold the cores, each barrier waits "
                  "for a thread that is not running, so tg falls several-fold and spreads widely; measure on a "
                  "quiet machine.")

    def detect(self, host_cpu: dict) -> dict:
        """The programs found (binaries.py), their build, and the host CPU as the one device."""
        from xpubench.backends.llamacpp_.binaries import find
        from xpubench.devices.detect import cpu_device

        found = find()
        said = {"error": found.missing} if found.missing else {}   # `xpubench env` prints it; cases say it when skipped
        return {"version": found.build.get("version"), **found.record(), **said, "devices": [cpu_device(host_cpu)]}

    def versions(self) -> dict:
        """The build's version without running anything (a file lookup): a plan without llama.cpp keeps the
        machine's identity (the ceilings cache key) the same as a full detection's."""
        from xpubench.backends.llamacpp_.binaries import find

        return {"version": find().build.get("version")}

    def supports(self, workload, backend: str | None = None) -> bool:
        return workload.name == "llama"

    def unsupported(self, case) -> str | None:
        from xpubench.backends.llamacpp_.binaries import find
        from xpubench.backends.llamacpp_.gguf_file import GGUF_TYPES
        from xpubench.workloads.llama.options import LlamaOptions

        if case.mode != "generate":
            return "llama.cpp runs generation only (llama-bench): train with torch or jax"
        if kind_of(case.device) is not CPU:
            return f"xpubench runs llama.cpp's CPU build only; {case.device} is not a CPU"
        if case.devices > 1 or case.batch_size > 1:
            return "llama-bench generates one sequence at a time (batch 1, one device)"
        if case.precision not in GGUF_TYPES:
            return f"llama.cpp has no {case.precision} weights (GGUF: {', '.join(GGUF_TYPES)})"
        group = LlamaOptions.of(case.options).int4_group_size   # the case's (llama.cpp writes llama GGUFs)
        if case.precision == "int4" and group != 32:
            return f"llama.cpp's q4_0 has groups of 32 weights; int4_group_size {group} has no llama.cpp format"
        programs = find()
        if programs.bench is None:
            return programs.missing
        if case.precision in ("int8", "int4") and programs.quantize is None:
            return f"{case.precision} needs llama-quantize beside {programs.bench}, and there is none"
        return None

    def generator(self, case):
        from xpubench.backends.llamacpp_.case import llama_bench_for

        try:
            return llama_bench_for(case)
        except FileNotFoundError as exc:
            raise Unsupported(f"llama.cpp: {exc}") from None


BACKEND = LlamaCppBackend()
