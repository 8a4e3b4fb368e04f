"""``xpubench serve``: how many users can a server on this machine serve within a latency target
(src/xpubench/serve/, docs/serving.md). The friendly face of ``xpubench run --mode serve``: its flags make
the same plan (plan/serve.py: a case per point), run by the same machinery (api.run: each point in a worker
process of its own, ``--repeat K`` processes each, ``--resume``, ``--budget``), shown the serving way
(cli/serve_show.py).

    xpubench serve --server llamacpp --model smollm-135m --format q8_0 --concurrency 1,2,4,8 \\
        --lengths 1k/1k --scale 1/16 --slo ttft=500ms,itl=50ms,p=90 --price 0.10 -o serve.jsonl
    xpubench serve --url http://127.0.0.1:8000 --endpoint chat --rate 0.5,1,2 --requests 64
    xpubench serve --resume serve.jsonl
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import os
from pathlib import Path

from xpubench.errors import UserError, stop_signal, stopped_by
from xpubench.plan.options_text import csv
from xpubench.results.redact import split_credentials

MAX_REQUESTS = 100_000   # per point: its record (each request kept) stays within a results file's line
ENDPOINTS = ("completions", "chat")     # /v1/completions, /v1/chat/completions
SERVERS = ("llamacpp", "sglang", "vllm")   # the engines whose records start a server (Backend.server())
RESUMED = ("url", "api_key")            # what --resume takes besides the file: the credentials again


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
    who.add_argument("--server", choices=SERVERS, help="start an engine's server here: llama.cpp's llama-server, "
                     "vLLM or SGLang (the last two where installed: usually a GPU machine)")
    who.add_argument("-d", "--device", help="--server: the device it runs on (default: the first accelerator the "
                     "engine sees, else the CPU); --url: the device the server runs on, as its points are keyed "
                     "(default: remote)")
    who.add_argument("--weights", metavar="DIR|GGUF", help="--server: a checkpoint folder (vLLM, SGLang: with its "
                     "tokenizer), or a GGUF file (llama.cpp)")
    who.add_argument("--model", help="--server llamacpp: random weights of a named shape (default smollm-135m)")
    who.add_argument("--format", help="--server: the weights' format (default: the engine's, q8_0 for llama.cpp, "
                     "bfloat16 for vLLM and SGLang); --url: the format the server's model is in, where it does not "
                     "say (llama.cpp says)")
    who.add_argument("--slots", type=_whole, help="--server: requests at once (default: the largest concurrency)")
    who.add_argument("--threads", type=_whole, help="--server llamacpp: llama-server's -t (default: this process's "
                     "cores)")
    who.add_argument("--served-model", help="the requests' model field (default: the server's first model)")
    load = p.add_argument_group("the load")
    load.add_argument("--endpoint", choices=ENDPOINTS, default="completions",
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
    load.add_argument("--repeat", type=_whole, default=1, help="measure each point K times, each in a process of "
                      "its own, round by round (the run's --processes)")
    load.add_argument("--budget", type=_seconds, metavar="SECONDS", help="seconds for the whole sweep: a point "
                      "that does not fit is recorded as skipped (as run's --budget)")
    load.add_argument("--seed", type=int, default=0, help="prompts and arrivals (0)")
    out = p.add_argument_group("the answer")
    out.add_argument("--slo", help="e.g. ttft=500ms,itl=50ms,p=90: goodput and the capacity line")
    out.add_argument("--price", type=_seconds, metavar="USD_PER_HOUR", help="$ per hour of the server")
    out.add_argument("--label", help="the points' model name in results (default: the name it is served under); "
                     "the same label on two servers lets compare match them")
    out.add_argument("-o", "--output", help="results file, new or empty (default xpubench-HOST-DATE-PID.jsonl; as "
                     "run's: never through a link, one writer at a time)")
    out.add_argument("--resume", metavar="FILE", help="measure the points of an interrupted sweep that FILE lacks "
                     "(with --url's credentials, if any, again)")
    p.set_defaults(serve_defaults=vars(p.parse_args([])))


def request_of(args):
    """The flags checked and read into the sweep's PlanRequest (one line, exit 2, on anything wrong)."""
    from xpubench.plan import PlanRequest
    from xpubench.serve.figures import parse_slo
    from xpubench.serve.prompts import fraction, lengths

    if bool(args.url) == bool(args.server):
        raise UserError("give one of --url URL (a running server) or --server NAME (start one here: "
                        f"{', '.join(SERVERS)})")
    if args.url and (args.weights or args.model or args.slots or args.threads):
        raise UserError("--weights, --model, --slots and --threads are for --server, not --url")
    if args.weights and args.model:
        raise UserError("give --weights or --model, not both")
    url, headers = _endpoint(args)
    if args.warmup is not None and args.warmup < 0:
        raise UserError(f"--warmup must be at least 0, got {args.warmup}")
    if max(args.requests or 0, args.warmup or 0) > MAX_REQUESTS:
        raise UserError(f"--requests and --warmup are at most {MAX_REQUESTS:,} per point (run more points, or "
                        "--repeat)")
    if args.prompts != "random" and not Path(args.prompts).expanduser().is_file():
        raise UserError(f"--prompts {args.prompts}: no such file (or give random)")
    if args.slo:
        parse_slo(args.slo)
    inp, outp = lengths(args.lengths, fraction(args.scale))
    options = {"url": url, "input_len": args.input_len or inp, "output_len": args.output_len or outp,
               "endpoint": args.endpoint, "requests": args.requests, "warmup": args.warmup,
               "duration_s": args.duration, "request_timeout_s": args.request_timeout,
               "point_timeout_s": args.point_timeout, "slo": args.slo, "price_per_hour": args.price,
               "ignore_eos": not args.no_ignore_eos, "label": args.label, "served_model": args.served_model,
               "slots": args.slots, "threads": args.threads, "format": args.format, "preset": args.model,
               "prompts": args.prompts if args.prompts == "random" else str(Path(args.prompts).expanduser().resolve()),
               **_weights(args.weights)}
    return PlanRequest(workloads=["llama"], backends=[args.server] if args.server else None, modes=["serve"],
                       devices=[args.device] if args.device else None, users=args.concurrency, rates=args.rate,
                       seed=args.seed, budget_s=args.budget, headers=headers,
                       options={k: v for k, v in options.items() if v is not None})


def _weights(given: str | None) -> dict[str, str]:
    """--weights: a GGUF file served as it is ({"gguf": path}), or a checkpoint folder ({"weights": path})."""
    if not given:
        return {}
    path = Path(given).expanduser()
    if path.is_file():
        return {"gguf": str(path.resolve())}
    if not path.is_dir():
        raise UserError(f"--weights {given}: no such file or folder")
    return {"weights": str(path.resolve())}


def _endpoint(args) -> tuple[str | None, dict[str, str]]:
    """--url without its user information, and the headers that carry the credentials (docs/serving.md): a
    record, a line on the terminal and an error hold the URL alone (results/redact.py)."""
    if args.api_key and not args.url:
        raise UserError("a key (--api-key) goes with --url: a server started here asks for none")
    if not args.url:
        return None, {}
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
        return url.rstrip("/"), {"Authorization": f"Basic {base64.b64encode(':'.join(credentials).encode()).decode()}"}
    if args.api_key:
        return url.rstrip("/"), {"Authorization": f"Bearer {args.api_key}"}
    return url.rstrip("/"), {}


def cmd_serve(args, console) -> int:
    if importlib.util.find_spec("httpx") is None:   # xpubench's dependency, and only serve's (docs/serving.md)
        raise UserError("xpubench serve needs httpx, which is not installed here: pip install httpx")
    from xpubench import api
    from xpubench.cli.serve_show import SweepShow
    from xpubench.serve.host import Hosts

    if args.resume:
        given = [k for k, v in vars(args).items() if k not in (*RESUMED, "resume", "serve_defaults", "command")
                 and v != args.serve_defaults.get(k)]
        if given:
            raise UserError(f"--resume takes the sweep from the results file: drop --{given[0].replace('_', '-')} "
                            "(only the credentials of its --url go with it: its key, or USER:PASSWORD@ in the address)")
        headers, request, out = _endpoint(args)[1] if args.url else {}, None, Path(args.resume)
    else:
        request = request_of(args)
        headers, out = request.headers, Path(args.output) if args.output else api.default_output()
    show = SweepShow(console, out, None if args.resume else args)
    hosts = Hosts(headers=headers, say=show.say, fatal=True)
    fresh = not os.path.lexists(out)
    try:
        with show:
            results = api.run(request, output=None if args.resume else out, resume=out if args.resume else None,
                              processes=None if args.resume else args.repeat, hooks=show.hooks(), hosts=hosts)
    except UserError:   # the server did not start: a file made here that holds nothing is removed again
        if fresh and out.is_file() and not out.is_symlink() and not out.stat().st_size:
            out.unlink()
            api.plan_path(out).unlink(missing_ok=True)
        raise
    except KeyboardInterrupt as exc:   # each point measured (and the cut one's finished requests) is in the file
        stopped = stop_signal(exc)
        show.ended(None)
        show.say(f"xpubench serve: interrupted ({stopped_by(stopped)}): `xpubench serve --resume {out}` measures "
                 "the points it lacks")
        return 128 + stopped
    show.ended(results)
    return 0
