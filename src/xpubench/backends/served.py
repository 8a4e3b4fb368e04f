"""What the engines that only serve have in common (vLLM, SGLang: backends/vllm_/, backends/sglang_/): a
server started for ``serve`` cases (``Backend.server()``), no loop of xpubench's, the devices torch sees, and
the weight formats they name as torch does."""

from __future__ import annotations

from xpubench.backends.base import Backend

# a precision or format asked -> their --dtype
DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16", "half": "float16",
          "fp32": "float32", "float32": "float32", "float": "float32", "auto": "auto"}


class ServedBackend(Backend):
    """Installed where its server's program is (``versions()["program"]``, found without importing it)."""

    trains = False
    matmul_dtypes = ()
    precisions = ("bf16", "fp16", "fp32")
    startup_s = 0.5                  # a serve point's worker (httpx); the server starts once for its points

    def installed(self, env: dict, backend: str) -> bool:
        return bool((env.get("backends", {}).get(self.name) or {}).get("program"))

    def detect(self, host_cpu: dict) -> dict:
        return self.versions()

    def device_backend(self, backend: str) -> str:
        return "torch"

    def supports(self, workload, backend: str | None = None) -> bool:
        return False                 # no loop of xpubench's: its cases are serve points (plan/serve.py)

    def unsupported(self, case) -> str | None:
        return None if case.mode == "serve" else f"{self.title} runs serve cases only (--mode serve)"
