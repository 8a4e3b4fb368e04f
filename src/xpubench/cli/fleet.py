"""`xpubench fleet FILE.toml -o DIR`: one plan on many machines through their own engines (src/xpubench/fleet/,
docs/fleet.md); ``--resume DIR``, ``--collect DIR``, ``--dry-run``, ``--submit``."""

from __future__ import annotations

from pathlib import Path

from xpubench.errors import UserError
from xpubench.legible.plaintext import shown

RUN_MODULE = "xpubench.cli"   # `python -m xpubench.cli run ...`: what each machine runs (cli/__main__.py)


def add_parser(sub) -> None:
    p = sub.add_parser("fleet", help="one plan on many machines, through Slurm, SSH, Kubernetes, SkyPilot or this "
                                     "one; a column per machine in the summary (docs/fleet.md)")
    p.add_argument("file", nargs="?", help="the fleet file: a [run] table of `xpubench run` options (the keys of "
                   "--config files) and one or more [[machine]] tables")
    p.add_argument("-o", "--output", metavar="DIR", help="the fleet's folder: each machine's results in "
                   "DIR/<name>.jsonl (`xpubench site DIR`, `report DIR` and `compare DIR` read it)")
    p.add_argument("--dry-run", action="store_true", help="check the file and the engines (sbatch, partitions), "
                   "print what each machine would be sent; submit and write nothing")
    p.add_argument("--resume", metavar="DIR", help="start again the machines of DIR whose plan is not finished, "
                   "each with only its cases left")
    p.add_argument("--submit", action="store_true", help="kubernetes and skypilot machines: call kubectl / sky on "
                   "the files written (default: write them for you to submit)")
    p.add_argument("--collect", metavar="DIR", help="read the kubernetes and skypilot machines' logs (kubectl logs, "
                   "sky logs, or DIR/logs/<name>.log) into DIR/<name>.jsonl")
    p.add_argument("--no-progress", action="store_true", help="a line per change instead of the live table (it is "
                   "off anyway when the output is not a terminal)")


def _mode(args) -> str:
    given = [m for m, on in (("new", args.file is not None), ("resume", args.resume), ("collect", args.collect)) if on]
    if len(given) != 1:
        raise UserError("give one of: FILE.toml -o DIR (a new fleet), --resume DIR, --collect DIR")
    mode = given[0]
    if mode == "new" and not args.output:
        raise UserError("-o DIR is needed: the folder where each machine's results go (DIR/<name>.jsonl)")
    if mode != "new" and args.output:
        raise UserError(f"--{mode} names the folder itself: drop -o")
    if mode == "collect" and (args.dry_run or args.submit):
        raise UserError("--collect reads what came back: drop --dry-run and --submit")
    return mode


def cmd_fleet(args, console) -> int:
    from xpubench.fleet import drive

    mode = _mode(args)
    if mode == "collect":
        out = Path(args.collect)
        return _finish(out, drive.collect(out, run_module=RUN_MODULE), console)
    if mode == "new":
        out = Path(args.output)
        folder = drive.new(args.file, out, run_module=RUN_MODULE, submit=args.submit)
        machines, notes = list(folder.fleet.machines), []
    else:
        out = Path(args.resume)
        folder, machines, notes = drive.resumed(out, run_module=RUN_MODULE, submit=args.submit)
    for note in notes:
        console.print(note, markup=False, highlight=False, soft_wrap=True)
    if args.dry_run:
        return drive.dry_run(folder, machines, console)
    if not machines:
        console.print("nothing left to run", markup=False, highlight=False, soft_wrap=True)
        return _finish(out, drive.Outcome({}, drive.EXIT_OK), console, folder)
    outcome = drive.drive(folder, machines, console, live=console.is_terminal and not args.no_progress,
                          first=mode == "new")
    return _finish(out, outcome, console, folder)


def _finish(out: Path, outcome, console, folder=None) -> int:
    """Each machine's state, then the summary of every results file in DIR (a column per machine) and the answer."""
    from xpubench import analysis
    from xpubench.fleet.drive import results_files
    from xpubench.fleet.file import read
    from xpubench.fleet.folder import Folder
    from xpubench.report.render.terminal import print_run_output

    for name, (state, line) in outcome.states.items():
        console.print(f"{name}: {state}" + (f" ({line})" if state == "done" else f": {line}" if line else ""),
                      markup=False, highlight=False, soft_wrap=True)
    folder = folder or Folder(out, read(out / "fleet.toml"), RUN_MODULE)
    files = results_files(folder)
    if files:
        loaded = analysis.load(files)
        for f in loaded:
            for warning in f.warnings:
                console.print(f"warning: {shown(warning)}", markup=False, highlight=False, soft_wrap=True)
        print_run_output(loaded, console, out)
    else:
        console.print(f"no results in {shown(out)} yet", markup=False, highlight=False, soft_wrap=True)
    return outcome.code
