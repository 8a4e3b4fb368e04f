"""SGLang: a server started for ``serve`` cases (``xpubench serve --server sglang``, ``run -b sglang --mode
serve``), usually on a datacenter GPU; it runs no framework loop of xpubench's.

``python -m sglang.launch_server --model-path CHECKPOINT`` serves a Hugging Face checkpoint folder with its own
tokenizer under the case's name (``--served-model-name``), ``--max-running-requests`` at once of
``--context-length`` tokens, weights in ``--dtype``, with ``--enable-metrics``. It answers ``/health`` once
loaded, ``/get_server_info`` (its version among its settings) and Prometheus ``/metrics``
(``sglang:num_running_reqs``, ``sglang:num_queue_reqs``, ``sglang:token_usage``, the token counters). Its
cases run on the devices torch sees (a GPU's index given by ``CUDA_VISIBLE_DEVICES``). Not installable on
xpubench's CPU test machine: tests/test_serve_standin.py runs the lifecycle against a stand-in ``sglang``
package that speaks the same routes (docs/serving.md).
"""

from __future__ import annotations

import sys

from xpubench.backends.served import DTYPES, ServedBackend
from xpubench.backends.serverspec import ServerSpec


class SglangBackend(ServedBackend):
    name = "sglang"
    title = "SGLang"
    packages = ("sglang",)

    def install_hint(self) -> str:
        return 'pip install "sglang[all]" (on a machine its wheels support: a CUDA or ROCm GPU)'

    def versions(self) -> dict:
        """Its version, and its launcher (``python -m sglang.launch_server``) where it is, found unimported."""
        import importlib.util

        from xpubench.devices.detect import version_of

        found = importlib.util.find_spec("sglang")
        return {"version": version_of("sglang"), "program": found.origin if found else None, "devices": []}

    def server(self) -> ServerSpec:
        import importlib.util

        return ServerSpec(
            "SGLang", (sys.executable, "-m", "sglang.launch_server"),
            ("--model-path", "{model}", "--host", "{host}", "--port", "{port}", "--served-model-name", "{name}",
             "--dtype", "{format}", "--max-running-requests", "{slots}", "--context-length", "{context}",
             "--enable-metrics"),
            formats=DTYPES, default_format="bfloat16", version_route="/get_server_info",
            identified_by="server_info.version",
            device_variable="CUDA_VISIBLE_DEVICES",
            missing=None if importlib.util.find_spec("sglang") else f"sglang is not installed: {self.install_hint()}",
            telemetry={"running": ("sglang:num_running_reqs",), "waiting": ("sglang:num_queue_reqs",),
                       "kv_cache": ("sglang:token_usage",), "prompt_tokens": ("sglang:prompt_tokens_total",),
                       "output_tokens": ("sglang:generation_tokens_total",)})


BACKEND = SglangBackend()
