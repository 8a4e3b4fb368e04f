"""``xpubench serve``: how many users can a server on this machine serve within a latency target
(src/xpubench/serve/, docs/serving.md).

    xpubench serve --server llamacpp --model smollm-135m --format q8_0 --concurrency 1,2,4,8 \\
        --lengths 1k/1k --scale 1/16 --slo ttft=500ms,itl=50ms,p=90 --price 0.10 -o serve.jsonl
    xpubench serve --url http://127.0.0.1:8000 --endpoint chat --rate 0.5,1,2 --requests 64
"""

from __future__ import annotations

import argparse
from pathlib import Path

from xpubench.errors import UserError, stop_signal, stopped_by
from xpubench.plan.options_text import csv
from xpubench.results.plaintext import markup

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
    who.add_argument("--url", help="an OpenAI-compatible server, e.g. http://127.0.0.1:8000")
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
                      "at least 8)")
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
    out.add_argument("-o", "--output", default="xpubench-serve.jsonl", help="results file (appended)")


def settings_of(args):
    """The flags checked and read into serve.run.Settings (one line, exit 2, on anything wrong)."""
    from xpubench.serve.figures import parse_slo
    from xpubench.serve.prompts import fraction, lengths
    from xpubench.serve.run import Settings

    if bool(args.url) == bool(args.server):
        raise UserError("give one of --url URL (a running server) or --server llamacpp (start one here)")
    if args.url and (args.weights or args.model or args.slots or args.threads):
        raise UserError("--weights, --model, --slots and --threads are for --server llamacpp, not --url")
    if args.weights and args.model:
        raise UserError("give --weights or --model, not both")
    if args.url and not args.url.startswith(("http://", "https://")):
        raise UserError(f"--url {args.url}: give an http:// or https:// address")
    if args.warmup is not None and args.warmup < 0:
        raise UserError(f"--warmup must be at least 0, got {args.warmup}")
    if args.prompts != "random" and not Path(args.prompts).expanduser().is_file():
        raise UserError(f"--prompts {args.prompts}: no such file (or give random)")
    inp, outp = lengths(args.lengths, fraction(args.scale))
    concurrency = args.concurrency or ([] if args.rate else [1, 2, 4])
    from xpubench.results.store import check_writable

    check_writable(Path(args.output))
    return Settings(output=Path(args.output), url=args.url.rstrip("/") if args.url else None,
                    endpoint=ENDPOINTS[args.endpoint], concurrency=concurrency, rates=args.rate or [],
                    input_len=args.input_len or inp, output_len=args.output_len or outp, requests=args.requests,
                    warmup=args.warmup, duration_s=args.duration, request_timeout_s=args.request_timeout,
                    point_timeout_s=args.point_timeout, slo=parse_slo(args.slo) if args.slo else None,
                    price=args.price, seed=args.seed, prompts=args.prompts, ignore_eos=not args.no_ignore_eos,
                    label=args.label, model_name=args.served_model, repeat=args.repeat)


def cmd_serve(args, console) -> int:
    from xpubench.serve import target

    s = settings_of(args)
    console.print(f"xpubench serve: {len(s.concurrency)} concurrency and {len(s.rates)} rate points, "
                  f"{s.input_len} tokens in, {s.output_len} out -> {markup(s.output)}", highlight=False)
    outcome = None
    try:
        with target.opened(s, args, say=lambda line: console.print(markup(line), highlight=False)) as tgt:
            from xpubench.serve.run import sweep

            outcome = sweep(s, tgt, on_point=lambda p: console.print(markup(point_line(p)), highlight=False))
        stopped = outcome.interrupted
    except KeyboardInterrupt as exc:   # while the server started or stopped (a sweep's own keeps its points: run.py)
        stopped = stop_signal(exc)
        if outcome is None:
            console.print(f"xpubench serve: interrupted ({stopped_by(stopped)}) before the sweep began; nothing "
                          "was measured", highlight=False)
            return 128 + stopped
    console.print(points_table(outcome.points))
    if outcome.line:
        console.print(markup(outcome.line[:1].upper() + outcome.line[1:] + "."), highlight=False)
    console.print(f"results appended to {markup(s.output)}; `xpubench report {markup(s.output)}` shows them",
                  highlight=False)
    return 128 + stopped if stopped else 0   # 128 + the signal, as for every command


def _ms(v) -> str:
    return "n/a" if v is None else f"{v * 1e3:,.1f}"


def _at(p: dict) -> str:
    users = p.get("concurrency")
    return f"rate {p['request_rate']:g}/s" if p.get("request_rate") else f"{users} user{'s' if users != 1 else ''}"


def point_line(p: dict) -> str:
    at = _at(p)
    if p["status"] != "ok":
        return f"  {at}: {p['status']}: {p.get('message')}"
    return (f"  {at}: {p.get('output_tokens_per_s', 0):,.1f} output tok/s, TTFT p90 {_ms(p.get('ttft_p90_s'))} ms, "
            f"TPOT p90 {_ms(p.get('tpot_p90_s'))} ms, {p.get('failed', 0)} failed")


def points_table(points: list[dict]):
    from rich.table import Table

    t = Table(title="Serving sweep (latencies in ms: p50 / p90 / p99)")
    for col in ("load", "TTFT", "TPOT", "ITL", "E2E", "out tok/s", "per user tok/s", "req/s", "failed", "SLO met"):
        t.add_column(col, justify="left" if col == "load" else "right")
    for p in points:
        at = _at(p)
        lat = ["/".join(_ms(p.get(f"{n}_{q}_s")) for q in ("p50", "p90", "p99"))
               for n in ("ttft", "tpot", "itl", "e2e")]
        rate = [f"{p[k]:,.1f}" if p.get(k) is not None else "n/a"
                for k in ("output_tokens_per_s", "user_tokens_per_s", "requests_per_s")]
        met = f"{p['slo_attained']:.0%}" if p.get("slo_attained") is not None else "-"
        t.add_row(markup(at), *lat, *rate, f"{p.get('failed', 0)} of {p.get('requests', 0)}", met)
    return t
