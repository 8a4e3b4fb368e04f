"""docs/bad-input.md's generated sections: rows that tests run, printed as the doc shows them.

A section of the doc lies between ``<!-- generated: NAME -->`` and ``<!-- end generated: NAME -->``; its text is
what ``SECTIONS[NAME]`` prints. ``SECTIONS`` names, for each, a test module and its function that takes a folder
and returns its ``Case`` list (writing the files the cases read there); the module's tests run the same cases
(``run_case``, then ``check_row``), so a row of the doc is a test. ``test_bad_input.py``'s
``test_the_generated_sections_of_the_doc_are_current`` compares each section with the doc, and
``python tests/bad_input_doc.py --write`` rewrites them (``python tests/bad_input_doc.py`` prints them).

A new section: a function ``doc_cases(folder) -> list[Case]`` in its test module, one entry in ``SECTIONS``, the
two marker lines in the doc, then ``--write``.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import shlex
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "bad-input.md"
HEAD = "| input | command | what it says | exit code |\n|---|---|---|---|"
SECTIONS = {           # name -> "test module:function(folder) -> list[Case]"
    "site": "test_site_guard:doc_cases",
    "serve": "test_serve_cli:doc_cases",
    "credentials": "test_redaction:doc_cases",
    "csv-and-numbers": "test_csv_numbers:doc_cases",
    "gguf": "test_gguf_header:doc_cases",
    "accelerator-check": "test_accelerator_check:doc_cases",
    "fleet": "test_fleet:doc_cases",
    "engines": "test_engines:doc_cases",
}


@dataclass(frozen=True)
class Case:
    """One row: ``argv`` runs ``xpubench`` in-process, or, starting with ``bash scripts/accelerator_check.sh``,
    that script's main in-process; ``says``: text the line must hold (exit code 2: the one line on stderr;
    otherwise the first line of the output holding it); ``within``: the context it runs in, entered just
    before (the files it reads where another case's would differ, a lock a running command holds, a check
    that nothing changed: ``untouched``). The doc shows the case's folder as DIR."""

    input: str
    argv: str
    says: str
    code: int = 2
    env: dict[str, str] = field(default_factory=dict)
    within: Callable[[], contextlib.AbstractContextManager] | None = None


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str

    def line(self, case: Case) -> str:
        """The line the doc shows: stderr's one line, or the output's first line holding ``case.says``."""
        if case.code == 2:
            return self.err.strip()
        return next((ln for ln in (self.out + self.err).splitlines() if case.says in ln), "")


def run_case(case: Case) -> Outcome:
    argv = shlex.split(case.argv)
    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in case.env}
    os.environ.update(case.env)
    try:
        with case.within() if case.within else contextlib.nullcontext(), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            if argv[:2] == ["bash", "scripts/accelerator_check.sh"]:
                if str(ROOT / "scripts") not in sys.path:
                    sys.path.insert(0, str(ROOT / "scripts"))
                import accelerator_check

                code = accelerator_check.main(argv[2:], environ=dict(os.environ))
            else:
                from xpubench import cli

                code = cli.main(argv[1:])
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    return Outcome(code, out.getvalue(), err.getvalue())


def check_row(case: Case, outcome: Outcome) -> None:
    """What a row promises: its exit code; with 2, one line on stderr, no traceback; the text it says."""
    assert outcome.code == case.code, (outcome.code, outcome.err)
    assert "Traceback" not in outcome.err + outcome.out
    if case.code == 2:
        lines = [ln for ln in outcome.err.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith(("xpubench: error: ", "accelerator_check: ")), lines
    assert case.says in outcome.line(case), (case.says, outcome.line(case))


def tree(root: Path) -> dict[str, tuple]:
    """Everything under ``root`` as (kind, content or link target); links are not followed, FIFOs not opened."""
    out = {}
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(here, name)
            mode = path.lstat().st_mode
            rel = path.relative_to(root).as_posix()
            if stat.S_ISLNK(mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISREG(mode):
                out[rel] = ("file", path.read_bytes())
            else:
                out[rel] = ("folder" if stat.S_ISDIR(mode) else "special",)
    return out


@contextlib.contextmanager
def untouched(folder: Path) -> Iterator[None]:
    """A ``Case.within``: nothing under ``folder`` was written, deleted or replaced by the command."""
    before = tree(folder)
    yield
    assert tree(folder) == before, f"the command changed {folder}"


def cases(name: str, folder: Path) -> list[Case]:
    """SECTIONS[name]'s cases, their files written in ``folder``."""
    module, function = SECTIONS[name].split(":")
    return getattr(importlib.import_module(module), function)(folder)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def section(name: str) -> str:
    """The section's table, from the real outputs (the folder shown as DIR)."""
    rows = [HEAD]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for case in cases(name, folder):
            outcome = run_case(case)
            check_row(case, outcome)
            env = "".join(f"{k}={shlex.quote(v if len(v) <= 24 else v[:21] + '...')} " for k, v in case.env.items())
            command = (env + case.argv).replace(str(folder), "DIR")
            line = outcome.line(case).replace(str(folder), "DIR")
            if case.code != 2 and line != case.says:          # an output line: the part the case is about
                line = f"... {case.says} ..."
            rows.append(f"| {_cell(case.input)} | `{_cell(command)}` | {_cell(line)} | {outcome.code} |")
    return "\n".join(rows)


MARK = re.compile(r"<!-- generated: (?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- end generated: (?P=name) -->", re.DOTALL)


def in_doc(text: str) -> dict[str, str]:
    """{name: the section's text as the doc has it}."""
    return {m["name"]: m["body"].rstrip("\n") for m in MARK.finditer(text)}


def written(text: str, sections: dict[str, str]) -> str:
    """The doc's text with each named section replaced."""
    return MARK.sub(lambda m: marked(m["name"], sections[m["name"]]) if m["name"] in sections else m[0], text)


def marked(name: str, body: str) -> str:
    return f"<!-- generated: {name} -->\n{body}\n<!-- end generated: {name} -->"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "tests"))
    made = {name: section(name) for name in SECTIONS}
    if "--write" in sys.argv[1:]:
        DOC.write_text(written(DOC.read_text(encoding="utf-8"), made), encoding="utf-8")
    else:
        print("\n\n".join(marked(n, t) for n, t in made.items()))
