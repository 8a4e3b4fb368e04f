"""llama.cpp: an engine beside torch and JAX for a language model's generation (``-b llamacpp``).

It loads a GGUF of the case's weights (written from the workload's checkpoint folder, gguf_file.py; cached)
and times itself with its own ``llama-bench`` (bench.py), read back from its JSON output and recorded with
the same figures and the same bandwidth bound as torch's and JAX's, so the pp/tg table shows the runtimes
side by side. Formats: fp32, bf16, fp16 (GGUF F32, BF16, F16), int8 (q8_0), int4 (q4_0).

The programs come from xpubench's cached build of the pinned llama.cpp (scripts/build_llamacpp.sh),
``$XPUBENCH_LLAMACPP_DIR`` or PATH (binaries.py); where none is found the cases are skipped with that
reason. Without the ``gguf`` package (its ``imports``) the plan refuses them, with ``pip install
"xpubench[llamacpp]"`` (plan/defaults.py ``backend_problem``). The build's
version, commit and CMake flags are in the environment record, so in every result's fingerprint.
"""

from __future__ import annotations

from types import MappingProxyType

from xpubench.backends.engine import Engine, Weights
from xpubench.backends.serverspec import ServerSpec
from xpubench.devices.device import is_cpu

# llama-server's /props names of formats (llama_model_ftype_name) that are not the format's own name
REPORTED = {"all f32": "f32", "q4_k - medium": "q4_k_m"}


class LlamaCppBackend(Engine):
    name = "llamacpp"
    title = "llama.cpp"
    module = None                    # a program, not an import: detect() says whether it was found
    imports = ("gguf",)              # its GGUF is written with gguf-py (gguf_file.py)
    packages = ("gguf",)
    formats = MappingProxyType({"fp32": "F32", "bf16": "BF16", "fp16": "F16", "int8": "Q8_0", "int4": "Q4_0"})
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

    def unavailable(self, case) -> str | None:
        from xpubench.backends.llamacpp_.binaries import find

        if not is_cpu(case.device):
            return f"xpubench runs llama.cpp's CPU build only; {case.device} is not a CPU"
        if case.batch_size > 1:
            return "llama-bench generates one sequence at a time (batch 1)"
        programs = find()
        if programs.bench is None:
            return programs.missing
        if case.precision in ("int8", "int4") and programs.quantize is None:
            return f"{case.precision} needs llama-quantize beside {programs.bench}, and there is none"
        return None

    def server(self) -> ServerSpec:
        """llama.cpp's llama-server, built beside llama-bench: ``-np`` slots sharing ``-c`` tokens of context
        (continuous batching, its default), serving the case's name (``--alias``), its Prometheus metrics on."""
        from xpubench.backends.llamacpp_.binaries import SERVER, find
        from xpubench.backends.llamacpp_.gguf_file import FORMATS, GGUF_TYPES

        programs = find()
        program = programs.bench.parent / SERVER if programs.bench else None
        missing = (programs.missing if program is None else None if program.is_file() else
                   f"no {SERVER} beside {programs.bench} (scripts/build_llamacpp.sh builds it)")
        return ServerSpec(
            "llama.cpp llama-server", (str(program),) if program else (),
            ("-m", "{model}", "--host", "{host}", "--port", "{port}", "--alias", "{name}", "-np", "{slots}",
             "-c", "{total_context}", "--metrics", "--no-webui"), threads=("-t", "{threads}"), serves="gguf",
            formats={**{name: GGUF_TYPES[key][0].lower() for name, key in FORMATS.items()}, **REPORTED},
            default_format="q8_0",
            version_args=("--version",), identified_by="props.build_info", missing=missing,
            telemetry={"running": ("llamacpp:requests_processing",), "waiting": ("llamacpp:requests_deferred",),
                       "kv_cache": ("llamacpp:kv_cache_usage_ratio",),
                       "prompt_tokens": ("llamacpp:prompt_tokens_total",),
                       "output_tokens": ("llamacpp:tokens_predicted_total",)})

    def cannot_load(self, weights: Weights, fmt: str) -> str | None:
        if fmt == "int4" and weights.int4_group != 32:
            return (f"llama.cpp's q4_0 has groups of 32 weights; int4_group_size {weights.int4_group} has no "
                    "llama.cpp format")
        return self.lacks(fmt)

    def load(self, weights: Weights, fmt: str, device: str = "cpu"):
        """The GGUF of the weights in the format (written, or quantised by llama-quantize, unless cached)."""
        from xpubench.backends.llamacpp_.case_gguf import gguf_model

        return gguf_model(weights, fmt)

    def bench(self, model, *, prompt_len: int, new_tokens: int, depth: int, batch: int,
              budget_s: float | None) -> tuple[dict, dict]:
        from xpubench.backends.llamacpp_.bench import LlamaBench

        return LlamaBench(bench=model.bench, model=model.path, prompt_len=prompt_len, new_tokens=new_tokens,
                          depth=depth, facts=model.facts).measure(budget_s)


BACKEND = LlamaCppBackend()
