"""Command line: xpubench env | list | run | doctor | report | compare. Thin: parse, call, print.

Every error a user can cause ends in one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

from xpubench.cli import ceilings as ceilings_cli
from xpubench.cli import fleet as fleet_cli
from xpubench.cli import serve as serve_cli
from xpubench.cli import site as site_cli
from xpubench.envnames import REFRESH
from xpubench.errors import UserError, stop_signal, stopped_by, stops_like_ctrl_c
from xpubench.plan.options_given import add_run_arguments
from xpubench.plan.options_help import REFRESH_HELP, device_help, doctor_backend_help
from xpubench.plan.options_text import csv
from xpubench.version import __version__

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too by default)
        raise UserError(f"{message} (see `{self.prog} --help`)")

    def add_argument(self, *names, **kwargs):
        """Every flag that takes a value is read by ``_Once``: a repeated flag is never silently dropped."""
        if names and names[0].startswith("-") and kwargs.get("action") in (None, "store"):
            kwargs["action"] = _Once
        return super().add_argument(*names, **kwargs)


class _Once(argparse.Action):
    """A flag given twice: a list flag (a comma list: ``--size 256 --size 512``) keeps both, as
    ``--size 256,512`` would; any other flag is refused in one line (which of two values was meant is
    not for xpubench to guess). A flag given once is stored as argparse's "store" would."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_flags_given", set())
        if self.dest in given:
            earlier = getattr(namespace, self.dest)
            if not (isinstance(earlier, list) and isinstance(values, list)):
                raise argparse.ArgumentError(self, f"given twice ({earlier!r}, then {values!r}): give it once")
            values = earlier + values
        given.add(self.dest)
        setattr(namespace, self.dest, values)


def _percent(text: str) -> float:
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r}") from None
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"must be a percentage from 0 to 100, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="xpubench", description="Deep-learning speed on this hardware, per framework and device.")
    p.add_argument("--version", action="version", version=f"xpubench {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    env = sub.add_parser("env", help="what hardware and frameworks are here")
    env.add_argument("--json", action="store_true", help="print the same as JSON")
    env.add_argument("--refresh", action="store_true", help=REFRESH_HELP)

    sub.add_parser("list", help="workloads, backends and devices")

    run = sub.add_parser("run", help="run benchmarks (default: a brief run of everything)")
    add_run_arguments(run)   # every option of `run` is one row of plan.options.OPTIONS
    run.add_argument("--format", choices=["md", "csv", "json", "jsonl"], help="with -o -: the cases on stdout "
                     "in this format, nothing else there (progress on stderr; results to the default file)")

    doc = sub.add_parser("doctor", help="check that every device here measures honestly (about 15 s on a 2-core CPU; "
                                        "WARNs when the machine is busy)")
    doc.add_argument("-b", "--backend", type=csv(str, "backend"), help=doctor_backend_help())
    doc.add_argument("-d", "--device", type=csv(str, "device"), help=device_help())
    doc.add_argument("--json", action="store_true", help="print the checks as JSON")
    doc.add_argument("--refresh", action="store_true", help=REFRESH_HELP)
    doc.add_argument("--env-file", metavar="FILE", help="this machine's `xpubench env --json` record, just saved "
                     "(the accelerator check's env step), instead of detecting it again")

    ceilings_cli.add_parser(sub)   # xpubench ceilings (cli/ceilings.py)
    serve_cli.add_parser(sub)      # xpubench serve (cli/serve.py, src/xpubench/serve/)

    rep = sub.add_parser("report", help="HTML or Markdown report from results files")
    rep.add_argument("files", nargs="+", help="results files (JSON Lines) of `xpubench run`, or folders of them "
                     "(a fleet's DIR: every *.jsonl in it)")
    rep.add_argument("-o", "--output", help="the report's file (default: xpubench-report.html, or "
                     "xpubench-report.md with --format md)")
    rep.add_argument("--format", choices=["html", "md", "csv", "json", "jsonl"], default=None,
                     help="html or md (default: from -o's suffix, else html); with -o -: md, csv, json or jsonl "
                     "on stdout")
    rep.add_argument("--force", action="store_true", help="replace -o even if xpubench did not write it "
                     "(never a results file)")

    cmp_ = sub.add_parser("compare", help="compare matching cases of results files")
    cmp_.add_argument("files", nargs="+", help="results files, or folders of them (a fleet's DIR: its *.jsonl "
                      "by name): the first is the baseline, each other is compared with it")
    cmp_.add_argument("--format", choices=["table", "md", "html", "json", "csv"], default="table",
                      help="a terminal table (default), Markdown, HTML, JSON or CSV")
    cmp_.add_argument("-o", "--output", help="write to this file instead of the terminal (-: stdout, the "
                      "comparison alone; warnings and the gate's lines go to stderr)")
    cmp_.add_argument("--fail-on", metavar="PCT[,METRIC=PCT]", help="exit 1 when a case got slower by at least "
                      "PCT and its processes separate, e.g. 5%% or 5%%,decode_token_s=3%% (docs/sharing.md)")
    cmp_.add_argument("--min-change", type=_percent, default=5.0, metavar="PCT",
                      help="smallest change (in %%) called significant (default 5)")
    cmp_.add_argument("--force", action="store_true", help="replace -o even if xpubench did not write it "
                      "(never a results file)")
    site_cli.add_parser(sub)   # xpubench site (publish/site.py)
    fleet_cli.add_parser(sub)  # xpubench fleet (src/xpubench/fleet/)
    return p


def _one_line(exc: BaseException) -> str:
    """An error as the one line printed: escaped, every credential in it redacted (results/redact.py)."""
    from xpubench.legible.plaintext import shown
    from xpubench.results.redact import redacted

    return shown(redacted(" ".join(str(exc).split())))


def main(argv: list[str] | None = None) -> int:
    from xpubench.legible.plaintext import PlainConsole as Console
    from xpubench.legible.plaintext import plain_streams, shown

    plain_streams()   # an ASCII locale (LC_ALL=C): "+-" for "±", never a UnicodeEncodeError
    # piped or captured (CI logs, notebooks' !xpubench): wide tables rather than 80 folded columns
    wide = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
    console, err = Console(width=wide), Console(stderr=True)
    args = None
    try:
        with stops_like_ctrl_c():   # SIGTERM, SIGHUP: the way Ctrl-C goes (errors.py, docs/robustness.md)
            _check_working_folder()
            args = build_parser().parse_args(argv)
            if args.command is None:
                build_parser().print_help()
                return EXIT_USAGE
            if getattr(args, "refresh", False):   # the detection child and the run's brief bandwidth read it
                os.environ[REFRESH] = "1"
            return COMMANDS[args.command](args, console)
    except UserError as exc:
        err.print(f"xpubench: error: {_one_line(exc)}", markup=False, highlight=False, soft_wrap=True)
        return EXIT_USAGE
    except BrokenPipeError:  # `xpubench compare a b | head`
        return 0
    except OSError as exc:  # the file system said no (permission, disk full, ...): one line, not a traceback
        where = f" ({shown(exc.filename)})" if exc.filename else ""
        err.print(f"xpubench: error: {exc.strerror or _one_line(exc)}{where}", markup=False, highlight=False,
                  soft_wrap=True)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:   # Ctrl-C, SIGTERM or SIGHUP: each child was stopped on the way here
        signum = stop_signal(exc)
        run = getattr(args, "command", None) == "run"
        kept = "; finished cases are in the results file (use --resume)" if run else ""
        with contextlib.suppress(OSError):   # a hung-up terminal (SIGHUP) takes no more lines
            err.print(f"xpubench: interrupted ({stopped_by(signum)}){kept}", markup=False, highlight=False,
                      soft_wrap=True)
        return 128 + signum


def _check_working_folder() -> None:
    """A deleted working folder (``cd`` into it, removed from elsewhere) is one line, before a framework
    (oneMKL, XLA) finds it with a fatal error of its own."""
    try:
        os.getcwd()
    except FileNotFoundError:
        raise UserError("the current folder no longer exists (deleted while this shell was in it): cd to an "
                        "existing folder and run again") from None


def cmd_env(args, console) -> int:
    from xpubench.backends.detect import environment
    from xpubench.devices.render import render_environment

    env = environment()
    if args.json:
        print(json.dumps(env, indent=2))
    else:
        render_environment(env, console)
        console.print(ceilings_cli.cached_table(env))   # the measured ceilings of this machine, if cached
    return 0


def cmd_list(args, console) -> int:
    from xpubench.cli.listing import print_listing

    print_listing(console)
    return 0


def cmd_run(args, console) -> int:
    from xpubench.cli.run import execute_run

    if args.output == "-":   # the cases on stdout as --format says; everything else to stderr
        from xpubench.legible.plaintext import PlainConsole
        from xpubench.publish.formats import check_format

        args.print_format, args.output = check_format(args.format, "run"), None
        console = PlainConsole(stderr=True, width=console.width)
    elif args.format:
        raise UserError("--format goes with -o - (the cases on stdout); -o names the results file")
    return execute_run(args, console)


def cmd_doctor(args, console) -> int:
    """PASS / WARN / FAIL per check, backend and device; exit 1 on any FAIL (doctor/__init__.py)."""
    from xpubench import doctor
    from xpubench.api import _detect
    from xpubench.backends.envfile import load_environment

    # -b numpy: numpy's devices only (no torch or jax import)
    env = load_environment(args.env_file) if args.env_file else _detect(args.backend)
    live = None if args.json or not console.is_terminal else (lambda row: console.print(
        f"  {row.backend} {row.device} {row.check}: {row.status}", highlight=False, style="dim", markup=False))
    rows = doctor.diagnose(env, backends=args.backend, devices=args.device, on_row=live)
    if args.json:
        print(json.dumps([r.as_dict() for r in rows], indent=1, default=str))
    else:
        doctor.render(rows, console)
    return doctor.exit_code(rows)


def _check_inputs(files: list[str], output: str | None, force: bool, what: str) -> None:
    """Refuse unreadable results files and an output that must not be written before any work (one line,
    exit 2): report/base/outputs.py."""
    from xpubench.report.base.outputs import check_output
    from xpubench.results import store

    store.load_results(files)
    if output:
        check_output(output, files, force=force, what=what)


def results_files(paths: list[str]) -> list[str]:
    """``paths`` with each folder replaced by the results files in it (``*.jsonl``, subfolders too, by name, as
    `xpubench site` reads a folder: publish/collect.py; an empty one, a run interrupted before its first
    result, left out); a folder without one is one line."""
    from xpubench.publish.collect import find_files

    out = []
    for path in paths:
        if not os.path.isdir(path):
            out.append(path)
            continue
        found = [p for p in find_files(Path(path)) if p.stat().st_size]
        if not found:
            raise UserError(f"{_one_line(path)} holds no results files (*.jsonl)")
        out += [str(p) for p in found]
    return out


def cmd_report(args, console) -> int:
    from xpubench.report.render.build import default_output

    args.files = results_files(args.files)
    if args.output == "-" or args.format in ("csv", "json", "jsonl"):
        return _report_to_stdout(args)

    args.output = args.output or default_output(args.format)
    _check_inputs(args.files, args.output, args.force, "the report")
    from xpubench.api import report

    path = report(args.files, args.output, fmt=args.format, force=args.force)
    console.print(f"report written to {path}", markup=False, highlight=False)
    return 0


def _report_to_stdout(args) -> int:
    """`report FILES -o - --format md|csv|json|jsonl`: stdout holds the report or the cases alone."""
    from xpubench.publish.formats import check_format, report_text

    if args.output not in (None, "-"):
        raise UserError(f"--format {args.format} prints to stdout: use -o - (and > FILE to keep it)")
    fmt = check_format(args.format, "report")
    _check_inputs(args.files, None, args.force, "the report")
    sys.stdout.write(report_text(args.files, fmt))
    return 0


def cmd_compare(args, console) -> int:
    args.files = results_files(args.files)
    _check_inputs(args.files, None if args.output == "-" else args.output, args.force, "the comparison")
    from xpubench.report.compare_command import run_compare_command

    return run_compare_command(args.files, fmt=args.format, output=args.output, console=console,
                               min_change=args.min_change / 100, force=args.force, fail_on=args.fail_on)


COMMANDS = {"env": cmd_env, "list": cmd_list, "run": cmd_run, "doctor": cmd_doctor, "report": cmd_report,
            "compare": cmd_compare, "ceilings": ceilings_cli.cmd_ceilings, "serve": serve_cli.cmd_serve,
            "site": site_cli.cmd_site, "fleet": fleet_cli.cmd_fleet}

if __name__ == "__main__":
    sys.exit(main())
