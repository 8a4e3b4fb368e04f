"""Property (hypothesis, issue 51): whatever an output folder, its cache and a results folder hold, `xpubench
site` builds or refuses in one line, and after it nothing outside the output folder changed and no file the
site did not write is gone or changed.

Each example is a results folder of real records (tests/data: the gate's recorded files, lines of
tests/data/records/seed.jsonl), an earlier site of two of them (built once, copied), and up to four hazards:
a link (to a file or a folder outside) or a FIFO at one of the site's own names, a file of one's own in the
site, a cache with one field replaced by a value of another kind (an id of ``../..``, an address, a lone
surrogate, a huge number, deep JSON) with its manifest entry rewritten to match or not, a link, a FIFO or a
foreign file among the results, or the results folder inside the site. A few seconds in all.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import stat
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
from bad_input_doc import tree
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_site_guard import CACHE, GATE, MANIFEST

from xpubench import cli
from xpubench.publish.site import build_site

SEED = [line for line in (GATE.parent / "records" / "seed.jsonl").read_text().splitlines() if line.strip()]
GATE_FILES = ["base", "slower", "rerun"]
SITE_NAMES = ["index.html", "runs.csv", "w", "r", "w/matmul.html", "w/matmul.csv", CACHE, MANIFEST]
DEEP = json.loads("[" * 30 + "]" * 30)
POISON = st.sampled_from([None, "../../escaped", "https://example.invalid/x", "\udcff\u202e", "<script>", 1e308,
                          -1, 10 ** 30, [], {}, True, "x" * 3, DEEP])
HAZARDS = st.lists(st.one_of(
    st.tuples(st.just("link"), st.sampled_from(SITE_NAMES), st.sampled_from(["file", "folder"])),
    st.tuples(st.just("fifo"), st.sampled_from(SITE_NAMES)),
    st.tuples(st.just("foreign"), st.sampled_from(["notes.txt", "r/notes.txt", "w/x.html", ".git"])),
    st.tuples(st.just("in results"), st.sampled_from(["link", "fifo", "text", "folder link"])),
    st.tuples(st.just("results inside"), st.sampled_from(["r", "w", "mine"])),
), max_size=3)
CACHE_POISON = st.one_of(st.none(), st.tuples(st.just("poison"), st.integers(0, 10 ** 6), POISON,
                                              st.sampled_from([True, True, False])))


@pytest.fixture(scope="module")
def earlier_site(tmp_path_factory) -> Path:
    """A site of base.jsonl and slower.jsonl (the examples copy it)."""
    root = tmp_path_factory.mktemp("earlier")
    folder = root / "results"
    folder.mkdir()
    for name in GATE_FILES[:2]:
        shutil.copy(GATE / f"{name}.jsonl", folder)
    build_site(folder, root / "site")
    return root / "site"


def _leaves(value, at=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*at, k))
    elif isinstance(value, list) and value:
        for i, v in enumerate(value[:3]):
            yield from _leaves(v, (*at, i))
    yield at


def _poison(out: Path, pick: int, value, fix_manifest: bool) -> None:
    path = out / CACHE
    if not path.is_file() or path.is_symlink():
        return
    blob = json.loads(path.read_text())
    paths = [p for p in _leaves(blob) if p and p[0] == "records"] or [("records",)]
    *parents, last = paths[pick // 2 % len(paths)] if pick % 2 else (*paths[0][:2], "id")   # or an id added
    target = blob
    for p in parents:
        target = target[p]
    target[last] = value
    path.write_text(json.dumps(blob))
    manifest = out / MANIFEST
    if fix_manifest and manifest.is_file() and not manifest.is_symlink():
        files = json.loads(manifest.read_text())
        files["files"][CACHE] = [hashlib.sha256(path.read_bytes()).hexdigest()]
        manifest.write_text(json.dumps(files))


def _real_folder(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _replace(path: Path, make) -> None:
    """``make(path)`` in place of what is there, inside a real folder of the example only."""
    if not _real_folder(path.parent):
        return
    if _real_folder(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    make(path)


def setup(tmp: Path, earlier: Path, files: list[str], seeds: list[int], hazards: list[tuple]) -> tuple[Path, Path]:
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("mine")
    (outside / "data.jsonl").write_bytes((GATE / "rerun.jsonl").read_bytes())
    out = tmp / "site"
    shutil.copytree(earlier, out, symlinks=True)
    results = tmp / "results"
    results.mkdir()
    for name in files:
        shutil.copy(GATE / f"{name}.jsonl", results)
    for i in seeds:
        (results / f"seed-{i}.jsonl").write_text(SEED[i] + "\n")
    for hazard in hazards:
        kind, *args = hazard
        if kind == "link":
            target = outside / "notes.txt" if args[1] == "file" else outside
            _replace(out / args[0], lambda p, to=target: p.symlink_to(to))
        elif kind == "fifo":
            _replace(out / args[0], os.mkfifo)
        elif kind == "foreign":
            _replace(out / args[0], lambda p: p.write_text("mine"))
        elif kind == "poison":
            _poison(out, *args)
        elif kind == "in results":
            made = {"link": lambda p: p.symlink_to(outside / "data.jsonl"), "fifo": os.mkfifo,
                    "text": lambda p: p.write_text("not results\n"), "folder link": lambda p: p.symlink_to(outside)}
            _replace(results / f"hazard-{args[0].replace(' ', '-')}.jsonl", made[args[0]])
        elif kind == "results inside" and _real_folder(out / args[0]) and results.parent == tmp:
            results = results.rename(out / args[0] / "results")
    return out, results


def ours(snapshot: dict, earlier: dict) -> set[str]:
    """The paths under the output folder the earlier build wrote, as it wrote them, or that the manifest names
    with their content (a cache poisoned along with its manifest entry): the site may replace or delete those."""
    try:
        files = json.loads(snapshot[f"site/{MANIFEST}"][1])["files"]
    except (KeyError, IndexError, ValueError, TypeError):
        files = {}
    named = {f"site/{name}" for name, sums in files.items() if isinstance(sums, list)
             and snapshot.get(f"site/{name}", ("",))[0] == "file"
             and hashlib.sha256(snapshot[f"site/{name}"][1]).hexdigest() in sums}
    manifest = {f"site/{MANIFEST}"} if named else set()   # the manifest that named them
    return named | manifest | {p for p, v in snapshot.items() if earlier.get(p) == v}


@settings(max_examples=30, deadline=timedelta(seconds=20), database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(files=st.lists(st.sampled_from(GATE_FILES), min_size=1, max_size=3, unique=True),
       seeds=st.lists(st.integers(0, len(SEED) - 1), max_size=2, unique=True), hazards=HAZARDS, poison=CACHE_POISON)
def test_the_site_changes_nothing_it_did_not_write(earlier_site, files, seeds, hazards, poison):
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        out, results = setup(tmp, earlier_site, files, seeds, [*hazards, *([poison] if poison else [])])
        before = tree(tmp)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(["site", str(results), "-o", str(out)])
        after = tree(tmp)
        lines = [line for line in err.getvalue().splitlines() if not line.startswith("xpubench: warning:")]
        event(f"exit {code}" + (": cache not used" if "was not used" in err.getvalue() else ""))
        assert code in (0, 2) and "Traceback" not in err.getvalue(), err.getvalue()
        if code == 2:
            assert len(lines) == 1 and lines[0].startswith("xpubench: error: "), lines
            assert after == before   # refused before anything was written
            return
        mine = ours(before, {f"site/{p}": v for p, v in tree(earlier_site).items()})
        outside = {p: v for p, v in before.items() if p != "site" and not p.startswith("site/")}
        assert {p: after.get(p) for p in outside} == outside   # nothing outside the output folder changed
        foreign = {p: v for p, v in before.items() if p.startswith("site/") and p not in mine}
        assert {p: after.get(p) for p in foreign} == foreign   # nothing the site did not write gone or changed
        for path in out.rglob("*.html"):
            assert stat.S_ISREG(path.lstat().st_mode)
            hrefs = re.findall(r'href="([^"]*)"', path.read_text(encoding="utf-8"))
            assert not [h for h in hrefs if ":" in h or h.startswith("/")], (path, hrefs)
