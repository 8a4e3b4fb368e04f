"""vLLM: a server started for ``serve`` cases (``xpubench serve --server vllm``, ``run -b vllm --mode serve``),
usually on a datacenter GPU; it runs no framework loop of xpubench's.

``vllm serve CHECKPOINT`` (the ``vllm`` command on PATH, which its package installs) serves a Hugging Face
checkpoint folder with its own tokenizer under the case's name (``--served-model-name``), ``--max-num-seqs``
sequences at once of ``--max-model-len`` tokens, weights in ``--dtype``. It answers ``/health`` once loaded,
``/version`` and Prometheus ``/metrics`` (``vllm:num_requests_running``, ``vllm:num_requests_waiting``,
``vllm:kv_cache_usage_perc`` (``vllm:gpu_cache_usage_perc`` before its V1 engine), the token counters). Its
cases run on the devices torch sees (a GPU, its index given by ``CUDA_VISIBLE_DEVICES``; vLLM's CPU build on
the CPU). Not installable on xpubench's CPU test machine: tests/test_serve_standin.py runs the lifecycle
against a stand-in ``vllm`` on PATH that speaks the same routes (docs/serving.md).
"""

from __future__ import annotations

import shutil

from xpubench.backends.served import DTYPES, ServedBackend
from xpubench.backends.serverspec import ServerSpec

PROGRAM = "vllm"


class VllmBackend(ServedBackend):
    name = "vllm"
    title = "vLLM"
    module = None                    # a program on PATH: detect() says whether it is there
    packages = ("vllm",)

    def install_hint(self) -> str:
        return "pip install vllm (on a machine its wheels support: a CUDA or ROCm GPU, or its CPU build)"

    def versions(self) -> dict:
        from xpubench.devices.detect import version_of

        return {"version": version_of(PROGRAM), "program": shutil.which(PROGRAM), "devices": []}

    def server(self) -> ServerSpec:
        return ServerSpec(
            "vLLM", (PROGRAM, "serve"),
            ("{model}", "--host", "{host}", "--port", "{port}", "--served-model-name", "{name}", "--dtype", "{format}",
             "--max-num-seqs", "{slots}", "--max-model-len", "{context}"),
            formats=DTYPES, default_format="bfloat16", version_route="/version", identified_by="version",
            device_variable="CUDA_VISIBLE_DEVICES",
            missing=None if shutil.which(PROGRAM) else f"no `{PROGRAM}` on PATH: {self.install_hint()}",
            telemetry={"running": ("vllm:num_requests_running",), "waiting": ("vllm:num_requests_waiting",),
                       "kv_cache": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
                       "prompt_tokens": ("vllm:prompt_tokens_total",),
                       "output_tokens": ("vllm:generation_tokens_total",)})


BACKEND = VllmBackend()
