"""Who answers a sweep: the server at ``--url``, or llama.cpp's llama-server started here for it
(``--server llamacpp``) and stopped after it, Ctrl-C and errors included."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from xpubench.errors import UserError
from xpubench.serve.bounded import TEXT
from xpubench.serve.record import Target
from xpubench.serve.server import LlamaServer, provenance, server_name

CHAT_OVERHEAD = 64   # a chat template's tokens around the prompt, room kept in each slot's context


def _asked(s, first: str | None) -> str | None:
    """The requests' model field: --served-model, else the server's first id, unless it is longer than a
    record keeps (serve/bounded.py's TEXT): then none, and the server answers with its default."""
    return s.model_name or (first if first and len(first) <= TEXT else None)


@contextlib.contextmanager
def opened(s, args, say: Callable[[str], None] = print) -> Iterator[Target]:
    """The sweep's Target (a context: a server started here is stopped on leaving)."""
    if s.url:
        info, first = provenance(s.url, s.setup_timeout_s, s.headers)
        model = s.model_name or first or "unknown"
        yield Target(url=s.url, label=s.label or model.rsplit("/", 1)[-1], device="remote", precision="as-served",
                     server=server_name(info), model=model, provenance=info, asked=_asked(s, first))
        return
    from xpubench.backends.llamacpp_.bench import usable_threads
    from xpubench.serve.model import resolve

    served = resolve(args.weights, args.model, args.format, s.seed, usable_threads())
    slots = args.slots or max(s.concurrency or [8])   # one per user; rate points alone: 8 (more wait in its queue)
    context = s.input_len + s.output_len + CHAT_OVERHEAD
    server = LlamaServer(served.path, slots=slots, slot_context=context, threads=args.threads)
    say(f"starting {server.command_line}")
    with server:
        info, first = provenance(server.url, s.setup_timeout_s)
        version = server.version()
        say(f"llama-server {version} ready at {server.url} ({slots} slots, model {served.origin})")
        yield Target(url=server.url, label=s.label or served.label, device="cpu", precision=served.weight_format,
                     server=f"llama.cpp llama-server {version}", model=s.model_name or first or "unknown",
                     provenance=info | {"origin": served.origin}, command=server.command_line, asked=_asked(s, first))
    if server.proc is not None and server.proc.returncode not in (None, 0, -15):
        raise UserError(f"llama-server ended with status {server.proc.returncode}")
