"""`xpubench.bench()` as a notebook uses it (issue 32, item 8): its warnings point at the caller's line, not
the library's, and without output= it writes its results and plan to a temporary folder it names, never
the working directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pandas as pd

from xpubench import api
from xpubench.api import bench as bench_module


def model_file(tmp_path: Path) -> str:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "nets.py").write_text("def net():\n    raise NotImplementedError\n")
    return f"{tmp_path / 'models' / 'nets.py'}:net"


def fake_plan(monkeypatch, loaded: list) -> None:
    """A plan of no cases with one note (run() says a plan's notes as warnings), and a load that records
    the files it was given: what bench does around them is what is tested."""
    monkeypatch.setattr(api, "plan",
                        lambda *a, **k: api.Plan([], ["a note about the plan"], {"host": {}, "backends": {}}, None, 1))
    monkeypatch.setattr(api, "load", lambda paths: loaded.extend(paths) or pd.DataFrame({"case": []}))


def test_bench_warns_at_the_callers_line_and_writes_to_a_temporary_folder(monkeypatch, tmp_path, capsys):
    loaded: list = []
    fake_plan(monkeypatch, loaded)
    model = model_file(tmp_path)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = bench_module.bench(model, quick=True, processes=1)
    (output,) = loaded
    shutil.rmtree(Path(output).parent)
    notes = [w for w in caught if "a note about the plan" in str(w.message)]
    assert notes and all(Path(w.filename) == Path(__file__) for w in notes), [(w.filename, w.lineno) for w in notes]
    assert list((tmp_path / "work").iterdir()) == []              # nothing in the working directory
    assert Path(output).parent.parent == Path(tempfile.gettempdir()) and Path(output).parent.name.startswith(
        "xpubench-bench-")
    assert frame.attrs["results_file"] == str(output)
    assert f"results in {output}" in capsys.readouterr().out


def test_bench_writes_where_it_is_told(monkeypatch, tmp_path, capsys):
    loaded: list = []
    fake_plan(monkeypatch, loaded)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = bench_module.bench(model_file(tmp_path), quick=True, processes=1, output=tmp_path / "mine.jsonl")
    assert loaded == [tmp_path / "mine.jsonl"] and frame.attrs["results_file"] == str(tmp_path / "mine.jsonl")
    assert "results in" not in capsys.readouterr().out


BENCH_IN_A_PROCESS = """
import sys
from pathlib import Path
import pandas as pd
from xpubench import api
from xpubench.api import bench as bench_module

api.plan = lambda *a, **k: api.Plan([], [], {"host": {}, "backends": {}}, None, 1)
api.load = lambda paths: pd.DataFrame({"case": []})
frame = bench_module.bench(sys.argv[1], quick=True, processes=2)
folder = Path(frame.attrs["results_file"]).parent
assert folder.is_dir() and folder.name.startswith("xpubench-bench-"), folder   # there while the process lives
print(folder)
"""


def test_benchs_temporary_folder_goes_when_the_process_ends(tmp_path):
    """Issue 52 item 9: each ``bench()`` without output= left an ``xpubench-bench-*`` folder in the temp folder
    for good; it lasts as long as the process (a notebook's kernel), which can report from it until then."""
    temp = tmp_path / "temp"
    temp.mkdir()
    env = dict(os.environ, TMPDIR=str(temp))
    proc = subprocess.run([sys.executable, "-c", BENCH_IN_A_PROCESS, model_file(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    folder = Path(proc.stdout.strip().splitlines()[-1])
    assert folder.parent == temp and not folder.exists()
    assert [p.name for p in temp.iterdir() if p.name.startswith("xpubench-bench-")] == []
