"""OpenVINO GenAI: an engine for a language model's generation (``-b openvino``).

The workload's checkpoint folder is converted offline by OpenVINO's own converter and NNCF (convert.py,
cached), loaded into OpenVINO GenAI's ``LLMPipeline`` on the CPU and timed on the same ``generate``
calls by the pipeline (its perf metrics) and by xpubench (pipeline.py). Formats, as OpenVINO names
them: fp32 (FP32), bf16 (BF16), int8 (INT8_ASYM) and int4 (INT4_ASYM) weight compression. OpenVINO's
GPU and NPU devices are listed in its environment record; xpubench runs its CPU cases only.

Its workers import openvino and openvino_genai to run and, to convert, torch, transformers and NNCF
(``pip install "xpubench[openvino]"``).
"""

from __future__ import annotations

from types import MappingProxyType

from xpubench.backends.base import Unsupported
from xpubench.backends.engine import Engine, Weights
from xpubench.devices.device import is_cpu


class OpenVinoBackend(Engine):
    name = "openvino"
    title = "OpenVINO GenAI"
    module = "openvino_genai"
    imports = ("openvino", "openvino_genai", "nncf", "torch", "transformers")
    packages = ("openvino", "openvino-genai", "nncf")
    formats = MappingProxyType({"fp32": "FP32", "bf16": "BF16", "int8": "INT8_ASYM", "int4": "INT4_ASYM"})
    startup_s = 4.0                  # import, the pipeline's compile of a converted (cached) model

    def detect(self, host_cpu: dict) -> dict:
        """OpenVINO's version and devices (its GPU and NPU listed; the host CPU the one xpubench runs on)."""
        import openvino as ov
        import openvino_genai

        from xpubench.devices.detect import cpu_device

        # "version" as the distribution says it (what ``versions`` reads without importing: the machine's
        # identity is the same either way); the build string the library reports beside it
        return {**self.versions(), "build": openvino_genai.__version__, "openvino": ov.__version__,
                "openvino_devices": list(ov.Core().available_devices), "devices": [cpu_device(host_cpu)]}

    def install_hint(self) -> str:
        return 'pip install "xpubench[openvino]"'

    def unavailable(self, case) -> str | None:
        if not is_cpu(case.device):
            return f"xpubench runs OpenVINO GenAI on the CPU only; {case.device} is not a CPU"
        if case.batch_size > 1:
            return "xpubench times OpenVINO GenAI's tokens through its streamer, one sequence at a time (batch 1)"
        return None

    def cannot_load(self, weights: Weights, fmt: str) -> str | None:
        if fmt == "int4":
            c = weights.config
            heads = c["num_attention_heads"]
            rows = {c["hidden_size"], c["intermediate_size"], heads * (c.get("head_dim") or c["hidden_size"] // heads)}
            if any(n % weights.int4_group for n in rows):
                return (f"OpenVINO's INT4_ASYM groups of {weights.int4_group} weights must tile each row "
                        f"(lengths {', '.join(map(str, sorted(rows)))})")
        return self.lacks(fmt)

    def load(self, weights: Weights, fmt: str, device: str = "cpu"):
        from xpubench.backends.openvino_.convert import converted
        from xpubench.backends.openvino_.pipeline import load

        folder, cached = converted(weights, fmt)
        return load(folder, fmt, weights.config["vocab_size"], cached)

    def bench(self, model, *, prompt_len: int, new_tokens: int, depth: int, batch: int,
              budget_s: float | None) -> tuple[dict, dict]:
        from xpubench.backends.openvino_.pipeline import bench

        if depth:
            raise Unsupported("OpenVINO GenAI's LLMPipeline starts every generate call with an empty KV cache: "
                              "xpubench measures no --depth with it")
        return bench(model, prompt_len, new_tokens, budget_s)


BACKEND = OpenVinoBackend()
