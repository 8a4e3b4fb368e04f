"""A results file of `xpubench serve --url` (a server xpubench did not start) carries the fingerprint of the
client that sent the requests: the server's machine was never seen. `compare` and the report say so
("remote server: not seen by xpubench", report/tables/environment.py) where they printed the client's
frameworks as "not detected" and its CPU, kernels and busy share as if they were the server's, and never
call the environments different for facts nobody saw. The files are made here against the serve tests'
stand-in server (tests/hostile_server.py, its healthy ``ok`` behaviour)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hostile_server import HostileServer

from xpubench import analysis
from xpubench.cli import main
from xpubench.report.base.frame import ResultSet
from xpubench.report.tables.environment import LIKELY_CAUSE, environment_tables

DATA = Path(__file__).parent / "data"
LOCAL = DATA / "runs" / "llama-three-zen3.jsonl"   # a run on this kind of machine: devices, kernels, busy share
REMOTE = "remote server: not seen by xpubench"   # the words, decided in report/tables/environment.py
SWEEP = ["-c", "1", "--requests", "2", "--warmup", "0", "--input-len", "4", "--output-len", "4",
         "--request-timeout", "5"]


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> tuple[Path, Path]:
    """Two sweeps of one point at the stand-in server's URL (same key: compare matches them)."""
    pytest.importorskip("httpx", reason="xpubench serve needs httpx")
    folder = tmp_path_factory.mktemp("remote")
    with HostileServer(lifetime_s=30) as server:
        for name in ("a", "b"):
            assert main(["serve", "--url", server.url("ok"), *SWEEP, "-o", str(folder / f"{name}.jsonl")]) == 0
    return folder / "a.jsonl", folder / "b.jsonl"


def test_compare_of_two_remote_servers_says_neither_was_seen_in_every_format(served, tmp_path, capsys):
    capsys.readouterr()
    outputs = []
    for fmt in ("terminal", "md", "html"):
        out = tmp_path / f"compare.{fmt}"
        args = [] if fmt == "terminal" else ["--format", fmt, "-o", str(out)]
        assert main(["compare", *map(str, served), *args]) == 0
        outputs.append(capsys.readouterr().out if fmt == "terminal" else out.read_text())
    for text in outputs:
        flat = " ".join(text.split())
        assert "not detected" not in flat and "environments differ" not in flat, flat[:2000]
        assert "the environments cannot all be compared" in flat
        for side in ("A", "B"):
            assert f"{side}: {REMOTE} (its machine, devices and software are unknown)" in flat


def test_a_remote_servers_column_says_not_seen_beside_a_local_run_and_claims_no_difference(served):
    data = ResultSet.load(analysis.load([served[0], LOCAL]))
    (_, differs), = [t for t in environment_tables(data.items) if t[0] == "What differs"]
    remote = dict(zip(differs[""], differs["a"]))
    local = dict(zip(differs[""], differs[LOCAL.stem]))
    # every fact of a machine: the server's were never seen (the client's are not the server's)
    for label in ("host", "CPU", "memory", "torch devices", "llamacpp devices", "torch CPU kernels",
                  "CPU busy at start", "torch"):
        assert remote[label] == REMOTE and local[label] not in (REMOTE, "n/a"), (label, local.get(label))
    assert remote["xpubench"].startswith("0.") and re.match(r"\d{4}-", remote["recorded at"])  # what xpubench saw
    assert not [v for v in remote.values() if "not detected" in v], remote
    from xpubench.report.render.build import build_report

    warnings = build_report(analysis.load([LOCAL, served[0]]), charts=False).warnings
    [said] = [w for w in warnings if REMOTE in w]
    assert said.startswith(f"a against {LOCAL.stem}: the environments cannot all be compared: a: {REMOTE}")
    assert LIKELY_CAUSE not in said and "devices" not in said.split("unknown)")[1], said
