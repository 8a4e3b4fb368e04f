"""Who answers a sweep: the server at ``--url``, or llama.cpp's llama-server started here for it
(``--server llamacpp``) and stopped after it, Ctrl-C and errors included."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from xpubench.errors import UserError
from xpubench.serve.record import Target
from xpubench.serve.server import LlamaServer, provenance, server_name

CHAT_OVERHEAD = 64   # a chat template's tokens around the prompt, room kept in each slot's context


def _first_model(info: dict) -> str:
    models = [m for m in info.get("models") or [] if isinstance(m, str)]
    return models[0] if models else "unknown"


@contextlib.contextmanager
def opened(s, args, say: Callable[[str], None] = print) -> Iterator[Target]:
    """The sweep's Target (a context: a server started here is stopped on leaving)."""
    if s.url:
        info = provenance(s.url, headers=s.headers)
        model = s.model_name or _first_model(info)
        yield Target(url=s.url, label=s.label or model.rsplit("/", 1)[-1], device="remote", precision="as-served",
                     server=server_name(info), model=model, provenance=info)
        return
    from xpubench.backends.llamacpp_.bench import usable_threads
    from xpubench.serve.model import resolve

    served = resolve(args.weights, args.model, args.format, s.seed, usable_threads())
    slots = args.slots or max(s.concurrency or [8])   # one per user; rate points alone: 8 (more wait in its queue)
    context = s.input_len + s.output_len + CHAT_OVERHEAD
    server = LlamaServer(served.path, slots=slots, slot_context=context, threads=args.threads)
    say(f"starting {server.command_line}")
    with server:
        info = provenance(server.url)
        version = server.version()
        say(f"llama-server {version} ready at {server.url} ({slots} slots, model {served.origin})")
        yield Target(url=server.url, label=s.label or served.label, device="cpu", precision=served.weight_format,
                     server=f"llama.cpp llama-server {version}", model=_first_model(info) if s.model_name is None
                     else s.model_name, provenance=info | {"origin": served.origin}, command=server.command_line)
    if server.proc is not None and server.proc.returncode not in (None, 0, -15):
        raise UserError(f"llama-server ended with status {server.proc.returncode}")
