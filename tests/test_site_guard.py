"""`xpubench site` against a hostile output folder, cache and results files (issue 51, items 1-3 and 11): it
writes and deletes nothing it did not write, follows no link, opens no FIFO, trusts no field of its cache,
and one contributed file never ends the build. ``doc_cases`` are docs/bad-input.md's rows of the site
(tests/bad_input_doc.py)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import os
import re
import shutil
import unicodedata
from pathlib import Path

import pytest
from bad_input_doc import Case, check_row, run_case, untouched

from xpubench import cli
from xpubench.publish.site import build_site
from xpubench.report.base.outputs import html_comment
from xpubench.results.plaintext import shown

DATA = Path(__file__).resolve().parent / "data"
GATE = DATA / "gate"
MANIFEST, CACHE = ".xpubench-site.json", ".xpubench-cache.json"   # the site's own files (publish/folder.py)


def results(tmp: Path, *names: str, at: str = "results") -> Path:
    """A results folder of tests/data/gate's recorded files (base, slower, rerun)."""
    place = tmp / at
    place.mkdir(parents=True, exist_ok=True)
    for name in names or ("base",):
        (place / f"{name}.jsonl").write_bytes((GATE / f"{name}.jsonl").read_bytes())
    return place


def site(*argv: str) -> tuple[int, list[str]]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(["site", *argv])
    return code, [line for line in err.getvalue().splitlines() if line.strip()]


def built(tmp: Path) -> Path:
    """An earlier site of tmp/results at tmp/site."""
    build_site(results(tmp), tmp / "site")
    return tmp / "site"


def a_page(tmp: Path) -> str:
    return next(p.name for p in (built(tmp) / "r").glob("*.html"))


def _victim(tmp: Path) -> Path:
    (tmp / "elsewhere").mkdir()
    (tmp / "elsewhere" / "notes.txt").write_text("mine")
    return tmp / "elsewhere"


ROWS = [   # (input, what the folder holds, argv with {tmp}, what the line says)
    ("site: not a folder", lambda t: None, "site {tmp}/nope -o {tmp}/site", "not a folder of results files"),
    ("site inside its results", results, "site {tmp}/results -o {tmp}/results/site",
     "the site must not be written inside the results folder"),
    ("the results inside the site (named like its `r`)", lambda t: results(t, at="site/r"),
     "site {tmp}/site/r -o {tmp}/site", "the results folder must not lie inside the site's folder"),
    ("site over a folder of one's own", lambda t: (results(t), (t / "mine").mkdir(), (t / "mine" / "thesis.tex")
                                                    .write_text("mine")),
     "site {tmp}/results -o {tmp}/mine", "holds files xpubench did not write (thesis.tex"),
    ("a folder of one's own named like the site's (`w/notes.txt`), no earlier site",
     lambda t: (results(t), (t / "site" / "w").mkdir(parents=True), (t / "site" / "w" / "notes.txt").write_text("x")),
     "site {tmp}/results -o {tmp}/site", "holds files xpubench did not write (w;"),
    ("a site of an xpubench before the manifest",
     lambda t: (results(t), (t / "site").mkdir(), (t / "site" / "index.html")
                .write_text(f"<!DOCTYPE html>\n{html_comment()}\n")),
     "site {tmp}/results -o {tmp}/site", "a site is known by its .xpubench-site.json"),
    ("an earlier site's `w` a link to a folder elsewhere",
     lambda t: (built(t), [p.unlink() for p in (t / "site" / "w").iterdir()], (t / "site" / "w").rmdir(),
                (t / "site" / "w").symlink_to(_victim(t))),
     "site {tmp}/results -o {tmp}/site", "a link at w (never followed or replaced)"),
    ("an earlier site's page a link to a file elsewhere",
     lambda t: (built(t), (t / "site" / "w" / "matmul.html").unlink(), (t / "site" / "w" / "matmul.html")
                .symlink_to(_victim(t) / "notes.txt")),
     "site {tmp}/results -o {tmp}/site", "a link at w/matmul.html"),
    ("a FIFO at one of an earlier site's pages", lambda t: (os.unlink(t / "site" / "r" / (page := a_page(t))),
                                                            os.mkfifo(t / "site" / "r" / page)),
     "site {tmp}/results -o {tmp}/site", "a FIFO, socket or device at r/"),
    ("a file of one's own in an earlier site's `r`", lambda t: (built(t) / "r" / "notes.txt").write_text("mine"),
     "site {tmp}/results -o {tmp}/site", "a file xpubench did not write (r/notes.txt)"),
    ("an earlier site's page edited by hand", lambda t: (t / "site" / "r" / a_page(t)).write_text("my notes"),
     "site {tmp}/results -o {tmp}/site", ".html, changed since xpubench wrote it"),
    ("an earlier site's manifest not xpubench's", lambda t: (built(t) / MANIFEST)
     .write_text('{"xpubench_site": 1, "files": {"../../x": ["' + "0" * 64 + '"]}}'),
     "site {tmp}/results -o {tmp}/site", "a .xpubench-site.json that xpubench did not write"),
]


@contextlib.contextmanager
def _holding(folder: Path, setup):
    """The folder emptied, then holding what ``setup`` makes; nothing in it changed by the command."""
    for entry in folder.iterdir():
        shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    setup(folder)
    with untouched(folder):
        yield


def doc_cases(folder: Path) -> list[Case]:
    """docs/bad-input.md's rows of the site: each refused in one line, before anything is read or written."""
    return [Case(name, "xpubench " + argv.format(tmp=folder), says, within=functools.partial(_holding, folder, setup))
            for name, setup, argv, says in ROWS]


@pytest.mark.parametrize("name", [r[0] for r in ROWS])
def test_refused_and_nothing_touched(name, tmp_path):
    """Each refusal is one line and exit 2, before anything is read or written: nothing under tmp changes (the
    old code deleted the results inside the site and the `w/` of one's own, wrote through both links, and
    hung on the FIFO)."""
    case = next(c for c in doc_cases(tmp_path) if c.input == name)
    check_row(case, run_case(case))


def test_a_rebuild_replaces_its_files_and_deletes_only_its_own(tmp_path):
    """Pages are replaced (a temporary file, then a rename), never written into: a hard link to a page made
    elsewhere keeps its content. A results file removed takes its pages with it; nothing else goes."""
    out = built(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    os.link(out / "index.html", tmp_path / "elsewhere" / "index.html")
    kept = (tmp_path / "elsewhere" / "index.html").read_bytes()
    results(tmp_path, "slower")
    assert site(str(tmp_path / "results"), "-o", str(out))[0] == 0
    assert (tmp_path / "elsewhere" / "index.html").read_bytes() == kept != (out / "index.html").read_bytes()
    assert len(list((out / "r").glob("*.jsonl"))) == 2
    (tmp_path / "results" / "base.jsonl").unlink()
    assert site(str(tmp_path / "results"), "-o", str(out))[0] == 0
    assert len(list((out / "r").glob("*.jsonl"))) == 1
    manifest = json.loads((out / MANIFEST).read_text())["files"]
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - {MANIFEST}
    assert set(manifest) == on_disk and all(len(sums) == 1 for sums in manifest.values())


def _poison(out: Path, change) -> None:
    """Rewrite the site's cache with ``change(blob)``, and its manifest to match, as someone who can write the
    folder (a CI cache restored from elsewhere) would."""
    path = out / CACHE
    blob = json.loads(path.read_text())
    change(blob)
    path.write_text(json.dumps(blob))
    manifest = out / MANIFEST
    if manifest.exists():
        files = json.loads(manifest.read_text())
        files["files"][CACHE] = [hashlib.sha256(path.read_bytes()).hexdigest()]
        manifest.write_text(json.dumps(files))


def _ids(blob: dict, value: str) -> None:
    for record in blob["records"].values():
        record.update(id=value, machine=value)


def test_a_poisoned_cache_is_not_used(tmp_path):
    """A record id from the cache once named files (``../..``: written outside the site) and links (an
    address: a browser sent elsewhere). Now a cache with any field it should not have is not used."""
    out = built(tmp_path)
    _poison(out, lambda blob: _ids(blob, "../../escaped"))
    before = {p for p in tmp_path.iterdir()}
    code, lines = site(str(tmp_path / "results"), "-o", str(out))
    assert code == 0 and set(tmp_path.iterdir()) == before   # nothing written beside the site
    assert any("was not used" in line and "every file was read again" in line for line in lines), lines
    _poison(out, lambda blob: _ids(blob, "https://example.invalid/x"))
    assert site(str(tmp_path / "results"), "-o", str(out))[0] == 0
    for page in out.rglob("*.html"):
        hrefs = re.findall(r'href="([^"]*)"', page.read_text())
        assert hrefs and not [h for h in hrefs if ":" in h or h.startswith("/")], (page, hrefs)


@pytest.mark.parametrize("records", ['{"D": "text"}', '{"D": {"cases": [{"key": 5}]}}', "[]", '{"D": null}'])
def test_a_malformed_cache_is_rebuilt(tmp_path, records):
    out = built(tmp_path)

    def change(blob):
        digest = next(iter(blob["records"]))
        blob["records"] = json.loads(records.replace('"D"', json.dumps(digest)))

    _poison(out, change)
    code, lines = site(str(tmp_path / "results"), "-o", str(out))
    assert code == 0 and any("was not used" in line for line in lines), lines
    assert len(list((out / "r").glob("*.html"))) == 1


def test_nothing_local_is_published(tmp_path):
    """The cache once held the build machine's absolute paths; no file of the site names the folders now."""
    out = built(tmp_path)
    for path in out.rglob("*"):
        if path.is_file():
            assert str(tmp_path).encode() not in path.read_bytes(), path


def test_lone_surrogates_and_file_names_that_are_not_utf8(tmp_path):
    """A lone surrogate in a host name or version, or a file name that is not UTF-8, once ended the build
    with a UnicodeEncodeError (`report` reads the same files): shown escaped now, as the terminal does."""
    folder_ = results(tmp_path)
    records = [json.loads(line) for line in (GATE / "slower.jsonl").read_text().splitlines()]
    for r in records:
        r["fingerprint"].update(hostname="box\udcff", xpubench="0.1\ud800")
    (folder_ / "host.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    os.rename(folder_ / "base.jsonl", os.path.join(os.fsencode(folder_), b"caf\xe9.jsonl"))
    code, lines = site(str(folder_), "-o", str(tmp_path / "site"))
    assert code == 0, lines
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "box\\udcff" in index and "0.1\\ud800" in index and "caf\\udce9.jsonl" in index
    assert "box\\udcff" in (tmp_path / "site" / "machines.csv").read_text(encoding="utf-8")


def test_a_file_that_breaks_the_reader_is_left_out_with_its_reason(tmp_path, monkeypatch):
    """Any failure reading one file (here the analysis raising, as a record nobody foresaw could make it) leaves
    that file out with its reason; the others are built."""
    from xpubench import analysis

    real = analysis.analyse

    def analyse(results):
        if any(r.fingerprint and r.fingerprint.get("hostname") == "odd" for r in results):
            raise KeyError("peak_flops")
        return real(results)

    monkeypatch.setattr(analysis, "analyse", analyse)
    folder_ = results(tmp_path)
    records = [json.loads(line) for line in (GATE / "slower.jsonl").read_text().splitlines()]
    for r in records:
        r["fingerprint"]["hostname"] = "odd"
    (folder_ / "odd.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    code, lines = site(str(folder_), "-o", str(tmp_path / "site"), "--jobs", "1")
    assert code == 0 and lines == ["xpubench: warning: odd.jsonl left out: KeyError: 'peak_flops'"], lines
    assert "odd.jsonl: KeyError" in (tmp_path / "site" / "index.html").read_text()


def test_a_fifo_or_a_dangling_link_among_the_results_is_left_out_with_its_reason(tmp_path):
    """Never opened for long (a FIFO with no writer would block a read), never silently dropped."""
    folder_ = results(tmp_path)
    os.mkfifo(folder_ / "pipe.jsonl")
    (folder_ / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    code, lines = site(str(folder_), "-o", str(tmp_path / "site"))
    assert code == 0 and lines == ["xpubench: warning: gone.jsonl left out: cannot be read (No such file or directory)",
                                   "xpubench: warning: pipe.jsonl left out: is a FIFO (named pipe), not a regular file"]


INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u200e", "\u200f", "\u061c", "\u202e", "\u2067",
             "\u00ad"]


def test_invisible_characters_are_shown_escaped(tmp_path):
    """Zero-width and bidirectional marks reached the pages raw, so two machine labels looked the same: every
    format character is escaped now, by the terminal's own rule (results/plaintext.py ``shown``)."""
    folder_ = results(tmp_path)
    records = [json.loads(line) for line in (GATE / "slower.jsonl").read_text().splitlines()]
    for r in records:
        r["fingerprint"]["hostname"] = "gpu-box" + "".join(INVISIBLE)
    (folder_ / "twin.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert site(str(folder_), "-o", str(tmp_path / "site"))[0] == 0
    for path in (tmp_path / "site").rglob("*"):
        if path.suffix in (".html", ".csv"):
            text = path.read_text(encoding="utf-8")
            assert not [ch for ch in INVISIBLE if ch in text], path
    assert "gpu-box\\u200b\\u200c" in (tmp_path / "site" / "index.html").read_text()


def test_the_shared_rule_escapes_every_format_control_and_surrogate_character():
    """One rule for the terminal, the reports and the site: Unicode's Cc (but tab and newline), Cf and Cs."""
    unsafe = [chr(c) for c in range(0x110000)
              if unicodedata.category(chr(c)) in ("Cf", "Cs") or (unicodedata.category(chr(c)) == "Cc"
                                                                   and chr(c) not in "\t\n")]
    assert [hex(ord(ch)) for ch in unsafe if shown(ch) == ch] == []
    assert shown("é µs ✓ 日本\t\n") == "é µs ✓ 日本\t\n"
