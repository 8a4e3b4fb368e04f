"""Do two versions of xpubench report, compare and load every results file alike? (issue 53 item 1)

For every results file under tests/data and results/ (a file whose first line is a record with a
``schema_version``), it renders with each version:
  - ``report FILE -o - --format md|csv|json`` and ``report FILE -o x.html`` (the text: each PNG's bytes and
    the time it was written replaced by a placeholder), and a folder's files in one report (md);
  - ``compare A B`` (the terminal table) and ``compare A B -o - --format md|json|csv`` for every pair of
    files in one folder;
  - ``xpubench.load(FILE)``, the notebook's frame: its columns' types and its CSV.
Each version renders in a process of its own (``PYTHONPATH=SRC``), every command in that process
(``xpubench.cli.main``, stdout captured, 160 columns as when piped), into ``OUT/<name>/``; then every
file that differs is printed as a unified diff and the exit status is 1.

    python tests/same_outputs.py BASE_SRC [NEW_SRC] [--out DIR]

BASE_SRC is the ``src`` folder of the version before (a worktree: ``git worktree add /tmp/base b9b724f``,
then ``/tmp/base/src``); NEW_SRC defaults to this checkout's ``src``.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import itertools
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PNG = re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]+")
WRITTEN = re.compile(r"written \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00")   # when the report was written


def results_files() -> list[Path]:
    found = sorted([*ROOT.glob("tests/data/**/*.jsonl"), *ROOT.glob("results/**/*.jsonl")])
    return [p for p in found if b'"schema_version"' in p.read_bytes().split(b"\n", 1)[0]]


def commands(files: list[Path]) -> dict[str, list[str]]:
    """Output name -> the xpubench command line that prints it (``{html}``: a file to write)."""
    out: dict[str, list[str]] = {}
    for f in files:
        name = str(f.relative_to(ROOT).with_suffix("")).replace("/", "_")
        for fmt in ("md", "csv", "json"):
            out[f"report-{name}.{fmt}"] = ["report", str(f), "-o", "-", "--format", fmt]
        out[f"report-{name}.html"] = ["report", str(f), "-o", "{html}"]
    for folder, group in itertools.groupby(files, key=lambda p: p.parent):
        group = list(group)
        name = str(folder.relative_to(ROOT)).replace("/", "_")
        out[f"report-{name}-together.md"] = ["report", *map(str, group), "-o", "-", "--format", "md"]
        for a, b in itertools.combinations(group, 2):
            name = f"{a.relative_to(ROOT).with_suffix('')}-vs-{b.stem}".replace("/", "_")
            out[f"compare-{name}.txt"] = ["compare", str(a), str(b)]
            for fmt in ("md", "json", "csv"):
                out[f"compare-{name}.{fmt}"] = ["compare", str(a), str(b), "-o", "-", "--format", fmt]
    return out


def render(out: Path) -> None:
    """Every output of the xpubench on sys.path into ``out`` (this process: one version)."""
    import xpubench
    from xpubench.cli import main

    out.mkdir(parents=True, exist_ok=True)
    files = results_files()
    with tempfile.TemporaryDirectory() as tmp:
        for name, argv in commands(files).items():
            html = Path(tmp) / "report.html" if "{html}" in argv else None
            text, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(text), contextlib.redirect_stderr(err):
                code = main([str(html) if a == "{html}" else a for a in argv])
            body = text.getvalue()
            if html and html.exists():
                body = PNG.sub("data:image/png;base64,<PNG>", html.read_text())
                html.unlink()
            body = WRITTEN.sub("written <time>", body)
            (out / name).write_text(f"exit {code}\n{err.getvalue()}---\n{body}")
    for f in files:
        frame = xpubench.load([str(f)])
        name = str(f.relative_to(ROOT).with_suffix("")).replace("/", "_")
        types = "\n".join(f"{c}: {t}" for c, t in frame.dtypes.items())
        (out / f"frame-{name}.csv").write_text(f"{types}\n---\n{frame.to_csv(index=False)}")


def compare(base: Path, new: Path) -> int:
    differ = 0
    for path in sorted(base.iterdir()):
        other = new / path.name
        a = path.read_text().splitlines(keepends=True)
        b = other.read_text().splitlines(keepends=True) if other.exists() else ["(missing)\n"]
        if a != b:
            differ += 1
            sys.stdout.writelines(difflib.unified_diff(a, b, f"before/{path.name}", f"after/{path.name}", n=1))
    print(f"{differ} of {len(list(base.iterdir()))} outputs differ", file=sys.stderr)
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", nargs="?", help="the src folder of the version before")
    parser.add_argument("new", nargs="?", default=str(ROOT / "src"), help="the src folder after (this checkout's)")
    parser.add_argument("--out", default=None, help="where the outputs go (default: a temporary folder)")
    parser.add_argument("--render", metavar="DIR", help=argparse.SUPPRESS)   # one version, into DIR
    args = parser.parse_args()
    if args.render:
        render(Path(args.render))
        return 0
    if not args.base:
        parser.error("name the src folder of the version before")
    out = Path(args.out or tempfile.mkdtemp(prefix="same-outputs-"))
    for label, src in (("before", args.base), ("after", args.new)):
        env = {**os.environ, "PYTHONPATH": str(Path(src).resolve()), "MPLBACKEND": "Agg"}
        env.pop("COLUMNS", None)
        subprocess.run([sys.executable, __file__, "--render", str(out / label)], env=env, check=True, cwd=ROOT)
    print(f"outputs in {out}", file=sys.stderr)
    return compare(out / "before", out / "after")


if __name__ == "__main__":
    sys.exit(main())
