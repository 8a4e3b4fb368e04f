"""The results schema round-trip and the loader's refusals."""

import json

import pytest

from xpubench.errors import UserError
from xpubench.plan import Case
from xpubench.results import store
from xpubench.results.schema import SCHEMA_VERSION, Result


def make_result(i=0, status="ok"):
    case = Case(workload="matmul", backend="numpy", device="cpu", mode="matmul", size=64 * (i + 1))
    return Result(case=case.as_dict(), status=status, metrics={"warm_s": 0.5, "warning": None},
                  samples={"warm_s": [0.5, 0.51]}, series={}, placement="cpu",
                  fingerprint={"hostname": "h", "packages": {"numpy": "2"}}, started_at="2026-01-01T00:00:00+00:00",
                  duration_s=1.5)


def test_round_trip(tmp_path):
    path = tmp_path / "r.jsonl"
    originals = [make_result(0), make_result(1, "timeout")]
    for r in originals:
        store.append(path, r)
    loaded = store.load_file(path)
    assert loaded.warnings == []
    assert [r.__dict__ for r in loaded.results] == [r.__dict__ for r in originals]
    assert loaded.results[0].schema_version == SCHEMA_VERSION
    assert Case.from_dict(loaded.results[0].case).key == "matmul/numpy/cpu/matmul/fp32/n64"


def test_torn_last_line_is_dropped_with_warning(tmp_path):
    path = tmp_path / "r.jsonl"
    store.append(path, make_result(0))
    with open(path, "a") as fh:
        fh.write(make_result(1).to_json()[:40])  # killed mid-write
    loaded = store.load_file(path)
    assert len(loaded.results) == 1 and "incomplete last line" in loaded.warnings[0]
    assert "dropped" in store.drop_torn_tail(path)
    assert len(store.load_file(path).results) == 1 and path.read_text().endswith("\n")


@pytest.mark.parametrize("content,message", [
    ("", "is empty"),
    ("hello world\n", "not an xpubench results file"),
    ('{"a": 1}\n', "no schema_version"),
    ('[1, 2]\n', "not an xpubench results file"),
    (make_result(0).to_json() + "\nnot json\n", ":2: not JSON"),
    (json.dumps({"schema_version": SCHEMA_VERSION + 1}) + "\n", "newer than this xpubench"),
    (json.dumps({"schema_version": 0}) + "\n", "unknown schema version"),
    (json.dumps({"schema_version": 1, "case": {}, "status": "fine"}) + "\n", "malformed"),
])
def test_bad_files_are_refused_in_one_line(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(UserError, match=message) as err:
        store.load_file(path)
    assert "\n" not in str(err.value)


def test_missing_and_binary_files(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        store.load_file(tmp_path / "nope.jsonl")
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(UserError, match="not a text file"):
        store.load_file(tmp_path / "bin")


def test_disk_full_is_one_clear_line(tmp_path, monkeypatch):
    import builtins
    import errno

    path = tmp_path / "r.jsonl"
    store.append(path, make_result(0))
    real_open = builtins.open

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.fh.close()

        def write(self, _):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(builtins, "open", lambda p, mode="r", **kw: Full(real_open(p, mode, **kw))
                        if "a" in mode else real_open(p, mode, **kw))
    with pytest.raises(UserError, match="disk full"):
        store.append(path, make_result(1))
    monkeypatch.undo()
    assert len(store.load_file(path).results) == 1  # what was written before is intact
