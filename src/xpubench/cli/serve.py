"""``xpubench serve``: how many users can a server on this machine serve within a latency target
(src/xpubench/serve/, docs/serving.md).

    xpubench serve --server llamacpp --model smollm-135m --format q8_0 --concurrency 1,2,4,8 \\
        --lengths 1k/1k --scale 1/16 --slo ttft=500ms,itl=50ms,p=90 --price 0.10 -o serve.jsonl
    xpubench serve --url http://127.0.0.1:8000 --endpoint chat --rate 0.5,1,2 --requests 64
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import importlib.util
import os
from pathlib import Path

from xpubench.errors import UserError, stop_signal, stopped_by
from xpubench.plan.options_text import csv
from xpubench.results.redact import split_credentials

MAX_REQUESTS = 100_000   # per point: its record (each request kept) stays within a results file's line

ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < 1e7:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text!r}")
    return value


def _whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def add_parser(sub) -> None:
    p = sub.add_parser("serve", help="load an OpenAI-compatible server: latency and capacity under a sweep")
    who = p.add_argument_group("the server")
    who.add_argument("--url", help="an OpenAI-compatible server, e.g. http://127.0.0.1:8000 "
                     "(http://USER:PASSWORD@HOST: sent as Basic authentication, stored nowhere)")
    who.add_argument("--api-key", metavar="KEY", help="--url: sent as `Authorization: Bearer KEY`, stored nowhere")
    who.add_argument("--server", choices=["llamacpp"], help="start llama.cpp's llama-server here")
    who.add_argument("--weights", metavar="DIR|GGUF", help="--server: a GGUF file, or a checkpoint folder")
    who.add_argument("--model", help="--server: random weights of a named shape (default smollm-135m)")
    who.add_argument("--format", default="q8_0", help="--server: the weights' format (default q8_0)")
    who.add_argument("--slots", type=_whole, help="--server: parallel slots (default: the largest concurrency)")
    who.add_argument("--threads", type=_whole, help="--server: llama-server's -t (default: this process's cores)")
    who.add_argument("--served-model", help="the requests' model field (default: the server's first model)")
    load = p.add_argument_group("the load")
    load.add_argument("--endpoint", choices=list(ENDPOINTS), default="completions",
                      help="/v1/completions (default) or /v1/chat/completions")
    load.add_argument("-c", "--concurrency", type=csv(_whole, "concurrency"), help="closed-loop users per point "
                      "(default 1,2,4 without --rate)")
    load.add_argument("--rate", type=csv(_seconds, "rate"), help="open-loop points: Poisson requests/s")
    load.add_argument("--lengths", default="1k/1k", help="input/output tokens, e.g. 1k/1k, 1k/8k, 8k/1k")
    load.add_argument("--scale", default="1", help="scale --lengths down for a small machine, e.g. 1/16")
    load.add_argument("--input-len", type=_whole, help="prompt tokens (overrides --lengths)")
    load.add_argument("--output-len", type=_whole, help="max_tokens (overrides --lengths)")
    load.add_argument("--prompts", default="random", metavar="random|FILE", help="random words (seeded) or a "
                      "local text file's windows")
    load.add_argument("--no-ignore-eos", action="store_true", help="do not send ignore_eos")
    load.add_argument("--requests", type=_whole, help="measured requests per point (default 4 x concurrency, "
                      f"at least 8; at most {MAX_REQUESTS:,})")
    load.add_argument("--warmup", type=int, help="discarded requests before each point (default: its concurrency)")
    load.add_argument("--duration", type=_seconds, help="seconds per point: no request starts after it")
    load.add_argument("--request-timeout", type=_seconds, default=120.0, help="seconds per request (120)")
    load.add_argument("--point-timeout", type=_seconds, default=600.0, help="seconds per point (600)")
    load.add_argument("--repeat", type=_whole, default=1, help="run the whole sweep K times (processes)")
    load.add_argument("--seed", type=int, default=0, help="prompts and arrivals (0)")
    out = p.add_argument_group("the answer")
    out.add_argument("--slo", help="e.g. ttft=500ms,itl=50ms,p=90: goodput and the capacity line")
    out.add_argument("--price", type=_seconds, metavar="USD_PER_HOUR", help="$ per hour of the server")
    out.add_argument("--label", help="the case's name in results (default: the model's); the same label on "
                     "two servers lets compare match them")
    out.add_argument("-o", "--output", default="xpubench-serve.jsonl", help="results file (appended to; as run's: "
                     "never through a link, one writer at a time)")


def settings_of(args):
    """The flags checked and read into serve.run.Settings (one line, exit 2, on anything wrong)."""
    if importlib.util.find_spec("httpx") is None:   # xpubench's dependency, and only serve's (docs/serving.md)
        raise UserError("xpubench serve needs httpx, which is not installed here: pip install httpx")
    from xpubench.results.store import check_writable
    from xpubench.serve.figures import parse_slo
    from xpubench.serve.prompts import fraction, lengths
    from xpubench.serve.run import Settings

    if bool(args.url) == bool(args.server):
        raise UserError("give one of --url URL (a running server) or --server llamacpp (start one here)")
    if args.url and (args.weights or args.model or args.slots or args.threads):
        raise UserError("--weights, --model, --slots and --threads are for --server llamacpp, not --url")
    if args.weights and args.model:
        raise UserError("give --weights or --model, not both")
    url, headers, secrets = _endpoint(args)
    if args.warmup is not None and args.warmup < 0:
        raise UserError(f"--warmup must be at least 0, got {args.warmup}")
    if max(args.requests or 0, args.warmup or 0) > MAX_REQUESTS:
        raise UserError(f"--requests and --warmup are at most {MAX_REQUESTS:,} per point (run more points, or "
                        "--repeat)")
    if args.prompts != "random" and not Path(args.prompts).expanduser().is_file():
        raise UserError(f"--prompts {args.prompts}: no such file (or give random)")
    inp, outp = lengths(args.lengths, fraction(args.scale))
    concurrency = args.concurrency or ([] if args.rate else [1, 2, 4])
    check_writable(Path(args.output))
    return Settings(output=Path(args.output), url=url, headers=headers, secrets=secrets,
                    endpoint=ENDPOINTS[args.endpoint], concurrency=concurrency, rates=args.rate or [],
                    input_len=args.input_len or inp, output_len=args.output_len or outp, requests=args.requests,
                    warmup=args.warmup, duration_s=args.duration, request_timeout_s=args.request_timeout,
                    point_timeout_s=args.point_timeout, slo=parse_slo(args.slo) if args.slo else None,
                    price=args.price, seed=args.seed, prompts=args.prompts, ignore_eos=not args.no_ignore_eos,
                    label=args.label, model_name=args.served_model, repeat=args.repeat)


@contextlib.contextmanager
def results_file(out: Path, warn):
    """``run``'s rules for its results file (results/store.py, launch/runfile.py): a regular file that can be
    written, never through a link, held with run's writer lock for the whole sweep; one that exists must
    already hold results (a torn last line is cut off, as a resume does), and is appended to. A file made
    here that nothing was appended to is removed again."""
    from xpubench.launch.runfile import held
    from xpubench.results import store

    store.check_writable(out)
    fresh = not os.path.lexists(out)
    try:
        with held(out, create=fresh):
            if not fresh and out.stat().st_size:
                store.load_file(out)     # refuses a file that is not results before anything is appended to it
                torn = store.drop_torn_tail(out)
                if torn:
                    warn(torn)
            yield
    finally:
        if fresh and os.path.isfile(out) and not os.path.islink(out) and not out.stat().st_size:
            out.unlink()             # made here, and nothing was measured into it


def _endpoint(args) -> tuple[str | None, dict[str, str], tuple[str, ...]]:
    """--url without its user information, the headers that carry the credentials, and the secrets among them
    (docs/serving.md): a record, a line on the terminal and an error hold the URL alone (results/redact.py)."""
    if args.api_key and not args.url:
        raise UserError("a key (--api-key) goes with --url: a server started here asks for none")
    if not args.url:
        return None, {}, ()
    if not args.url.startswith(("http://", "https://")):
        raise UserError(f"--url {args.url}: give an http:// or https:// address")
    url, credentials = split_credentials(args.url)
    if "?" in url or "#" in url:
        raise UserError(f"--url: give the server's address without a ?query or #fragment (a key: --api-key), got {url}")
    if args.api_key is not None and not (args.api_key.isascii() and args.api_key.isprintable() and args.api_key):
        raise UserError("--api-key: give the key as printable ASCII (a header cannot carry anything else)")
    if credentials and args.api_key:
        raise UserError("give the credentials once: USER:PASSWORD@ in --url, or --api-key")
    if credentials:
        basic = base64.b64encode(":".join(credentials).encode()).decode()
        return url.rstrip("/"), {"Authorization": f"Basic {basic}"}, (basic, credentials[1])
    if args.api_key:
        return url.rstrip("/"), {"Authorization": f"Bearer {args.api_key}"}, (args.api_key,)
    return url.rstrip("/"), {}, ()


def cmd_serve(args, console) -> int:
    s = settings_of(args)
    from xpubench.cli.serve_show import SweepShow
    from xpubench.serve import target

    show = SweepShow(console, s, args)
    outcome = None
    with results_file(s.output, show.warn):
        show.started()
        try:
            with target.opened(s, args, say=show.say) as tgt:
                from xpubench.serve.run import sweep

                with show:
                    outcome = sweep(s, tgt, show.hooks())
            stopped = outcome.interrupted
        except KeyboardInterrupt as exc:   # while the server started or stopped (a sweep's own keeps its points)
            stopped = stop_signal(exc)
            if outcome is None:
                show.say(f"xpubench serve: interrupted ({stopped_by(stopped)}) before the sweep began; nothing was "
                         "measured")
                return 128 + stopped
    show.ended(outcome)
    return 128 + stopped if stopped else 0   # 128 + the signal, as for every command
