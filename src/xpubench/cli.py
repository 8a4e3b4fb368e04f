"""Command line: xpubench env | list | run | doctor | report | compare. Thin: parse, call, print.

Every error a user can cause ends in one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from xpubench.ceilings import cli as ceilings_cli
from xpubench.errors import UserError
from xpubench.version import __version__

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too by default)
        raise UserError(f"{message} (see `{self.prog} --help`)")


def _csv(kind, name: str):
    def parse(text: str):
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"empty {name} list: nothing to run")
        try:
            values = [kind(t) for t in items]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} must be a comma-separated list of numbers: {text!r}") from None
        if kind is int and any(v <= 0 for v in values):
            raise argparse.ArgumentTypeError(f"{name} must be above 0: {text!r}")
        return values
    return parse


def parse_size(text: str) -> int:
    """'8G', '512M', '1.5g', '4096' (bytes) -> bytes; at least api.MIN_MEMORY_LIMIT."""
    from xpubench.api import MIN_MEMORY_LIMIT

    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    t = text.strip().lower().removesuffix("ib").rstrip("b")
    try:
        value = float(t[:-1]) * units[t[-1]] if t and t[-1] in units else float(t)
    except ValueError:
        raise UserError(f"--memory-limit: not a memory size: {text!r} (try 4G or 512M)") from None
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"--memory-limit must be a positive size like 8G, got {text!r}")
    if value < MIN_MEMORY_LIMIT:
        raise UserError(f"--memory-limit {text} is too small: a worker needs at least 256M of address space "
                        "(torch about 1G, jax about 2G)")
    return int(value)


def _size_bytes(text: str) -> int:
    try:
        return parse_size(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--memory-limit").lstrip(": ")) from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text!r}")
    return value


def _percent(text: str) -> float:
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r}") from None
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"must be a percentage from 0 to 100, got {text!r}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a whole number above 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from xpubench.plan import SYNC_MODES

    p = _Parser(prog="xpubench", description="Deep-learning speed on this hardware, per framework and device.")
    p.add_argument("--version", action="version", version=f"xpubench {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    env = sub.add_parser("env", help="what hardware and frameworks are here")
    env.add_argument("--json", action="store_true", help="print the same as JSON")

    sub.add_parser("list", help="workloads, backends and devices")

    run = sub.add_parser("run", help="run benchmarks (default: a brief run of everything)")
    run.add_argument("-w", "--workload", type=_csv(str, "workload"), help="comma list (default: all)")
    run.add_argument("-b", "--backend", type=_csv(str, "backend"), help="numpy, torch, jax (default: installed)")
    run.add_argument("-d", "--device", type=_csv(str, "device"), help="cpu, gpu, gpu:1, tpu, mps (default: all)")
    run.add_argument("-p", "--precision", "--dtype", type=_csv(str, "precision"), help="fp32,tf32,bf16,fp16,int8")
    run.add_argument("--batch-size", type=_csv(int, "batch size"), help="per-device batch sizes")
    run.add_argument("--size", type=_csv(int, "matrix size"), help="matmul N (default 1024,2048,4096)")
    run.add_argument("--mode", type=_csv(str, "mode"), help="train, infer (default train)")
    run.add_argument("--devices", help="data-parallel device count N, or 'all'")
    run.add_argument("--scaling", action="store_true", help="sweep N = 1, 2, 4, ... devices")
    run.add_argument("--lr-scaling", action="store_true", help="scale the learning rate linearly with N")
    run.add_argument("--coordinator", metavar="HOST:PORT",
                     help="several hosts: process 0's address (docs/distributed.md)")
    run.add_argument("--num-processes", metavar="P", help="several hosts: how many processes (one per host)")
    run.add_argument("--process-id", metavar="I", help="several hosts: this process's id, 0..P-1")
    run.add_argument("--epochs", type=_positive)
    run.add_argument("--steps", type=_positive, help="cap on steps per epoch")
    run.add_argument("--train-samples", type=_positive)
    run.add_argument("--eval-samples", type=_positive)
    run.add_argument("--time-budget", type=_seconds, help="seconds of measurement per case")
    run.add_argument("--save-weights", metavar="DIR",
                     help="inference cases keep the weights they train in DIR (.npz; default: a temp cache)")
    run.add_argument("--data", choices=["synthetic", "real"], default=None)
    run.add_argument("--data-dir")
    run.add_argument("--download", action="store_true",
                     help="with --data real: fetch missing dataset files (checksum-verified) into the data dir")
    run.add_argument("--sync", choices=SYNC_MODES, default=None,
                     help="training: synchronise every step (per-step times; default on CPUs) or once per "
                          "steady epoch (pipelined; default on accelerators)")
    run.add_argument("--compile", choices=["auto", "on", "off"], default=None)
    run.add_argument("--seed", type=int, default=None)
    run.add_argument("--quick", action="store_true", help="a few steps per case (the default with no -w)")
    run.add_argument("--config", help="TOML file with the same options")
    run.add_argument("-o", "--output", help="results file (JSON Lines)")
    run.add_argument("--resume", help="finish the cases of an interrupted results file")
    run.add_argument("--processes", type=_positive, metavar="K",
                     help="worker processes per case, interleaved with the other cases (default 3; the "
                          "machine's noise between processes is measured only with 2 or more)")
    run.add_argument("--timeout", type=_seconds, help="seconds per worker process before it is killed")
    run.add_argument("--memory-limit", type=_size_bytes,
                     help="address-space cap (RLIMIT_AS) per worker of a CPU case, e.g. 8G; accelerator cases "
                          "run without it (CUDA, ROCm and libtpu reserve more address space than memory)")
    run.add_argument("--selftest", type=_csv(str, "selftest behaviour"),
                     help="deliberate faults, e.g. ok,raise,segfault,hang,oom (checks isolation)")
    run.add_argument("--no-progress", action="store_true")
    run.add_argument("--measure-ceilings", action="store_true",
                     help="measure the missing ceilings (FLOP/s, GB/s) before the run, ~30 s per precision on a CPU")
    run.add_argument("--dry-run", action="store_true",
                     help="print the cases the run would execute and an estimate of its time; run nothing")
    run.add_argument("--env-file", metavar="FILE",
                     help="with --dry-run: plan for the machine FILE describes (`xpubench env --json` saved there)")

    doc = sub.add_parser("doctor", help="check that every device here measures honestly (about a minute)")
    doc.add_argument("-b", "--backend", type=_csv(str, "backend"), help="numpy, torch, jax (default: installed)")
    doc.add_argument("-d", "--device", type=_csv(str, "device"), help="cpu, gpu, gpu:1, tpu, mps (default: all)")
    doc.add_argument("--json", action="store_true", help="print the checks as JSON")

    ceilings_cli.add_parser(sub)   # xpubench ceilings (ceilings/cli.py)

    rep = sub.add_parser("report", help="HTML or Markdown report from results files")
    rep.add_argument("files", nargs="+")
    rep.add_argument("-o", "--output", default="xpubench-report.html")
    rep.add_argument("--format", choices=["html", "md"], default=None)

    cmp_ = sub.add_parser("compare", help="compare matching cases of results files")
    cmp_.add_argument("files", nargs="+")
    cmp_.add_argument("--format", choices=["table", "md", "html", "json"], default="table")
    cmp_.add_argument("-o", "--output", help="write to this file instead of the terminal")
    cmp_.add_argument("--min-change", type=_percent, default=5.0, metavar="PCT",
                      help="smallest change (in %%) called significant (default 5)")
    return p


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    # piped or captured (CI logs, notebooks' !xpubench): wide tables rather than 80 folded columns
    wide = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
    console, err = Console(width=wide), Console(stderr=True)
    try:
        args = build_parser().parse_args(argv)
        if args.command is None:
            build_parser().print_help()
            return EXIT_USAGE
        if args.command == "run":
            _exit_on_sigterm()
        return COMMANDS[args.command](args, console)
    except UserError as exc:
        err.print(f"xpubench: error: {_one_line(exc)}", markup=False, highlight=False, soft_wrap=True)
        return EXIT_USAGE
    except BrokenPipeError:  # `xpubench compare a b | head`
        return 0
    except OSError as exc:  # the file system said no (permission, disk full, ...): one line, not a traceback
        where = f" ({exc.filename})" if exc.filename else ""
        err.print(f"xpubench: error: {exc.strerror or _one_line(exc)}{where}", markup=False, highlight=False,
                  soft_wrap=True)
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.print("xpubench: interrupted; finished cases are in the results file (use --resume)")
        return 130


def _exit_on_sigterm() -> None:
    """SIGTERM (kill, a batch scheduler) unwinds like Ctrl-C: the running worker's process group is
    killed and every finished case stays in the results file."""
    import signal
    import threading

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


def cmd_env(args, console) -> int:
    from xpubench.devices.detect import environment
    from xpubench.devices.render import render_environment

    env = environment()
    if args.json:
        print(json.dumps(env, indent=2))
    else:
        render_environment(env, console)
        console.print(ceilings_cli.cached_table(env))   # the measured ceilings of this machine, if cached
    return 0


def cmd_list(args, console) -> int:
    from xpubench.cli_list import print_listing

    print_listing(console)
    return 0


def cmd_run(args, console) -> int:
    from xpubench.cli_run import execute_run

    return execute_run(args, console)


def cmd_doctor(args, console) -> int:
    """PASS / WARN / FAIL per check, backend and device; exit 1 on any FAIL (doctor/__init__.py)."""
    from xpubench import doctor
    from xpubench.api import _detect

    env = _detect()
    live = None if args.json or not console.is_terminal else (lambda row: console.print(
        f"  {row.backend} {row.device} {row.check}: {row.status}", highlight=False, style="dim"))
    rows = doctor.diagnose(env, backends=args.backend, devices=args.device, on_row=live)
    if args.json:
        print(json.dumps([r.as_dict() for r in rows], indent=1, default=str))
    else:
        doctor.render(rows, console)
    return doctor.exit_code(rows)


def _check_inputs(files: list[str], output: str | None) -> None:
    """Refuse unreadable results files and an unwritable output before any work (one line, exit 2)."""
    from pathlib import Path

    from xpubench.results import store

    store.load_results(files)
    if output:
        store.check_writable(Path(output), what="the output")


def cmd_report(args, console) -> int:
    _check_inputs(args.files, args.output)
    from xpubench.api import report

    path = report(args.files, args.output, fmt=args.format)
    console.print(f"report written to {path}")
    return 0


def cmd_compare(args, console) -> int:
    _check_inputs(args.files, args.output)
    from xpubench.report.compare import run_compare_command

    return run_compare_command(args.files, fmt=args.format, output=args.output, console=console,
                               min_change=args.min_change / 100)


COMMANDS = {"env": cmd_env, "list": cmd_list, "run": cmd_run, "doctor": cmd_doctor, "report": cmd_report,
            "compare": cmd_compare, "ceilings": ceilings_cli.cmd_ceilings}

if __name__ == "__main__":
    sys.exit(main())
