"""A command imports only what it uses (docs/architecture.md, "Other rules"): the commands that
read results files run where the optional packages are absent (the accelerator check's bare environment,
docs/accelerators.md: no httpx, gguf, keras, hypothesis or transformers) and import no framework, nor
matplotlib where they draw nothing; ``xpubench serve --url`` holds no framework either, the CPU clock it
records measured in a child of its own (devices/clock.py). Each test runs its commands in one fresh child
process, whose ``sys.modules`` is what the commands imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_server import HostileServer

from xpubench.devices import clock
from xpubench.envnames import REFRESH
from xpubench.results import store

DATA = Path(__file__).resolve().parent / "data"
SERVED = Path(__file__).resolve().parents[1] / "results" / "cpu" / "serve_smollm-135m_q8_0.jsonl"
ABSENT = ("httpx", "gguf", "keras", "hypothesis", "transformers")   # not in the bare environment
FRAMEWORKS = ("torch", "jax", "jaxlib", "flax", "keras", "tensorflow")

CHILD = r"""
import json, sys
for name in json.loads(sys.argv[1]):
    sys.modules[name] = None          # an import of it fails as where it is not installed
from xpubench.cli import main

codes = []
for argv in json.loads(sys.argv[2]):
    try:
        codes.append(main(argv))
    except SystemExit as exc:         # --help
        codes.append(exc.code)
loaded = sorted({m.split(".")[0] for m, module in sys.modules.items() if module is not None})
print(json.dumps({"codes": codes, "modules": loaded}), file=sys.__stderr__)
"""


def _commands(commands: list[list[str]], codes: list[int], absent=(), env=None, cwd=None) -> tuple[set[str], str]:
    """``xpubench`` run with each argv in turn, in one child where ``absent`` cannot be imported, each ending with
    its code of ``codes``: (the top-level packages the child imported, its stderr)."""
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(list(absent)), json.dumps(commands)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=cwd, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = json.loads(proc.stderr.strip().splitlines()[-1])
    assert said["codes"] == codes, proc.stderr[-3000:]
    return set(said["modules"]), proc.stderr


def test_the_readers_run_without_the_optional_packages_and_import_no_framework_nor_an_unused_matplotlib(tmp_path):
    """report (a serving results file among them: its tables read serve/figures.py), compare, list and the help
    with httpx and the other optional packages absent; no framework imported, and no matplotlib where no chart
    is drawn (Markdown on stdout, compare's table). ``serve`` itself, which needs httpx, says so in one line."""
    report = DATA / "runs" / "report-zen3.jsonl"
    compared = [str(DATA / "compare" / name) for name in ("first.jsonl", "second.jsonl")]
    modules, err = _commands([["--help"], ["list"], ["serve", "--help"],
                              ["report", str(report), str(SERVED), "-o", "-", "--format", "md"],
                              ["compare", *compared],
                              ["serve", "--url", "http://127.0.0.1:9", "-o", "serve.jsonl"]],
                             [0, 0, 0, 0, 0, 2], absent=ABSENT, cwd=tmp_path)
    unused = modules & {*FRAMEWORKS, "matplotlib"}
    assert not unused, f"imported without being used: {sorted(unused)}"
    assert "xpubench: error: xpubench serve needs httpx, which is not installed here: pip install httpx" in err
    assert "Traceback" not in err


@pytest.mark.slow   # the clock's child imports JAX (~1-2 s of CPU)
def test_serve_measures_the_cpu_clock_in_a_child_and_holds_no_framework(tmp_path):
    """``xpubench serve --url`` where this CPU's clock is not cached yet (an empty cache folder): the clock is
    measured (the record's host has it) by a child process, and the serve process itself imported no
    framework (with JAX inside it, it peaked at ~250 MB rather than ~90 MB)."""
    pytest.importorskip("httpx", reason="xpubench serve needs httpx")
    out = tmp_path / "serve.jsonl"
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), COLUMNS="100")
    env.pop(REFRESH, None)
    with HostileServer(lifetime_s=30) as server:
        modules, _ = _commands([["serve", "--url", server.url("ok"), "-c", "1", "--requests", "2", "--warmup", "0",
                                 "--input-len", "4", "--output-len", "4", "--request-timeout", "5", "-o", str(out)]],
                               [0], env=env, cwd=tmp_path)
    held = modules & set(FRAMEWORKS)
    assert not held, f"the serve process imported {sorted(held)}"
    [run] = store.load_file(out).runs
    cpu = run.fingerprint["host"]["cpu"]
    assert cpu["mhz_measured"] and cpu["clock_fresh"], cpu.get("clock_method")


def test_a_clock_child_that_fails_or_hangs_is_a_reason_not_an_error(monkeypatch, tmp_path):
    """The clock's measuring child (devices/clock.py measured_mhz): one that ends without its answer, or runs
    past its time limit, leaves the clock unmeasured with the reason (the estimate then says so), never raises."""
    monkeypatch.setattr(clock.sys, "executable", "/bin/false")
    assert clock.measured_mhz() == ([], "not measured (its process ended with code 1: no output)")
    hangs = tmp_path / "hangs"
    hangs.write_text("#!/bin/sh\nexec sleep 30\n")
    hangs.chmod(0o755)
    monkeypatch.setattr(clock.sys, "executable", str(hangs))
    assert clock.measured_mhz(timeout_s=0.3) == ([], "not measured (its process ran past 0.3 s)")
