"""How an engine's OpenAI-compatible server is started and read (``ServerSpec``, what ``Backend.server()``
returns: llama.cpp's llama-server, vLLM, SGLang): its command line, the formats it serves, its health and
version routes, its Prometheus metrics and what only it says of itself. serve/server.py starts, watches and
stops it from this record; nothing here starts a process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ServerSpec:
    """An engine's OpenAI-compatible server as serve/server.py starts it (``Backend.server()``): the command
    and its arguments (``{model}``, ``{host}``, ``{port}``, ``{name}``, ``{slots}``, ``{context}`` (a request's),
    ``{total_context}`` (the slots'), ``{format}`` and ``{threads}`` filled in), what it serves, and what it
    answers: its health, its version, its Prometheus metrics with the names of those xpubench records beside
    a point's figures (serve/telemetry.py: ``running``, ``waiting``, ``kv_cache``, ``prompt_tokens``,
    ``output_tokens``), and the part of its description only it gives (serve/server.py ``provenance``), by
    which a server at a URL is known to be this one."""

    title: str                                    # how messages name it: "llama-server", "vLLM"
    program: tuple[str, ...]                      # the command before its arguments: ("vllm", "serve")
    arguments: tuple[str, ...]                    # its arguments, with the fields above
    threads: tuple[str, ...] = ()                 # the arguments that set its CPU threads (``{threads}``), if any
    serves: str = "checkpoint"                    # {model}: "gguf" (a GGUF with a vocabulary, serve/model.py)
    #                                               or "checkpoint" (a Hugging Face folder and its tokenizer)
    formats: Mapping[str, str] = field(default_factory=dict)   # a precision or format asked -> the server's name
    default_format: str = ""                      # served when none is asked
    health: str = "/health"                       # answers 200 once the model is loaded
    version_route: str | None = None              # answers {"version": ...} (vLLM /version, SGLang /get_server_info)
    version_args: tuple[str, ...] = ()            # or the program's flag that prints "version: ..." (llama-server)
    metrics: str | None = "/metrics"              # Prometheus text, where it serves it
    telemetry: Mapping[str, tuple[str, ...]] = field(default_factory=dict)   # xpubench's name -> its metrics' names
    identified_by: str = ""                       # what only it says of itself, a path in the description
    #                                               ("props.build_info": llama.cpp's /props; "version": vLLM's)
    device_variable: str | None = None            # the variable that places it on one accelerator (its index)
    missing: str | None = None                    # why its program is not here (None: it is)

    def argv(self, **values: Any) -> list[str]:
        """The command line, each field filled in (``threads`` None: its own default)."""
        words = [*self.arguments, *(self.threads if values.get("threads") else ())]
        return [*self.program, *(w.format(**values) for w in words)]

    def format_of(self, asked: str) -> str | None:
        """The server's name for a precision or format asked (``int8`` -> ``q8_0``), None if it has none."""
        return self.formats.get(asked.lower())
