"""The results schema round-trip, reading version 1 files, folding a case's processes into one result,
and the loader's refusals."""

import json
from pathlib import Path

import numpy as np
import pytest

from xpubench.case import Case
from xpubench.errors import UserError
from xpubench.plan.resolve import recorded_case
from xpubench.results import store
from xpubench.results.schema import SCHEMA_VERSION, Run

RECORDED = Path(__file__).parent / "data" / "compare"


def make_result(i=0, status="ok", process=0, processes=1, warm=(0.5, 0.51), **metrics):
    case = Case(workload="matmul", backend="numpy", device="cpu", mode="matmul", size=64 * (i + 1))
    return Run(case=case.as_dict(), status=status, metrics={"warm_s": float(np.median(warm)), "warning": None,
                                                             **metrics},
               samples={"warm_s": list(warm)}, series={}, placement="cpu",
               fingerprint={"hostname": "h", "packages": {"numpy": "2"}}, started_at="2026-01-01T00:00:00+00:00",
               duration_s=1.5, process=process, processes=processes, machine={"load_1m_start": 0.5})


def test_round_trip(tmp_path):
    path = tmp_path / "r.jsonl"
    originals = [make_result(0), make_result(1, "timeout")]
    for r in originals:
        store.append(path, r)
    loaded = store.load_file(path)
    assert loaded.warnings == []
    assert [r.__dict__ for r in loaded.runs] == [r.__dict__ for r in originals]
    for result, run in zip(loaded.results, originals):  # one process: the result is its run, field for field
        assert result.runs == [run] and result.metrics == run.metrics and result.status == run.status
        assert (result.samples, result.placement, result.duration_s) == (run.samples, run.placement, run.duration_s)
    assert loaded.runs[0].schema_version == SCHEMA_VERSION == 3
    assert isinstance(loaded.results[0].case, Case) and loaded.results[0].key == "matmul/numpy/cpu/matmul/fp32/n64"


def test_version_1_records_read_as_one_process():
    loaded = store.load_file(RECORDED / "first.jsonl", recorded_case)  # written before processes were repeated
    [run], [result] = loaded.runs, loaded.results
    assert json.loads((RECORDED / "first.jsonl").read_text())["schema_version"] == 1
    assert (run.process, run.processes, run.machine, run.schema_version) == (0, 1, {}, 1)   # the version it was
    assert result.metrics["warm_s"] == 0.0012790858974377 and "processes" not in result.metrics


def test_processes_fold_into_one_result(tmp_path):
    path = tmp_path / "r.jsonl"
    warm = [(1.00, 1.01, 0.99), (1.02, 1.03, 1.01), (1.80, 1.82, 1.79)]  # the third process: the machine slowed
    for round_ in range(3):
        for i in (0, 1):
            store.append(path, make_result(i, process=round_, processes=3, warm=warm[round_], reps=10 + round_,
                                           warm_flops_per_s=1 / float(np.median(warm[round_]))))
    loaded = store.load_file(path)
    assert len(loaded.runs) == 6 and len(loaded.results) == 2
    r = loaded.results[0]
    assert [run.process for run in r.runs] == [0, 1, 2]
    assert r.metrics["warm_s"] == 1.02                      # median of the process medians
    assert r.metrics["warm_flops_per_s"] == pytest.approx(1 / 1.02)  # every rate from the same process
    assert r.metrics["reps"] == 11 and isinstance(r.metrics["reps"], int)  # whole numbers: a value that occurred
    assert r.samples["warm_s"] == [v for w in warm for v in w]
    assert r.metrics["processes"] == 3 and r.metrics["process_disagreement"] == "bimodal"
    assert "1 of 3 processes ran 1.78x slower" in r.metrics["warning"]
    assert r.duration_s == 4.5 and r.started_at == "2026-01-01T00:00:00+00:00"


def test_a_failed_process_is_named_and_the_others_kept(tmp_path):
    path = tmp_path / "r.jsonl"
    store.append(path, make_result(0, process=0, processes=3, warm=(1.0, 1.1, 0.9)))
    failed = make_result(0, "crash", process=1, processes=3)
    failed.message, failed.metrics, failed.samples = "worker died from SIGSEGV", {}, {}
    store.append(path, failed)
    [r] = store.load_file(path).results
    assert r.status == "ok" and r.metrics["warm_s"] == 1.0 and len(r.runs) == 2
    assert r.message == "1 of 2 processes did not end ok: process 2 of 3: crash: worker died from SIGSEGV"
    assert "figures from the other 1" in r.metrics["warning"]
    path2 = tmp_path / "only-failed.jsonl"
    store.append(path2, failed)
    [r] = store.load_file(path2).results
    assert r.status == "crash" and r.message == "worker died from SIGSEGV"


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
    (json.dumps({"schema_version": 2, "case": {}, "status": "ok", "process": -1}) + "\n", "malformed"),
    (json.dumps({"schema_version": 2, "case": {}, "status": "ok", "machine": []}) + "\n", "malformed"),
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


def test_machine_state_from_proc_files(tmp_path):
    from xpubench.results import machine

    proc, sys_cpu = tmp_path / "proc", tmp_path / "sys"
    proc.mkdir()
    (sys_cpu / "cpu0" / "cpufreq").mkdir(parents=True)

    def write(load, stat, khz):
        (proc / "loadavg").write_text(f"{load} 0.50 0.40 1/200 4242\n")
        (proc / "stat").write_text("cpu  " + " ".join(map(str, stat)) + " 0 0\ncpu0 1 2 3\n")
        (sys_cpu / "cpu0" / "cpufreq" / "scaling_cur_freq").write_text(f"{khz}\n")

    write(0.25, [100, 0, 50, 800, 10, 0, 0, 40], 3500000)
    start = machine.snapshot(proc, sys_cpu)
    write(1.75, [300, 0, 100, 900, 10, 0, 0, 140], 2900000)  # 450 jiffies: 100 idle, 100 stolen
    state = machine.state(start, machine.snapshot(proc, sys_cpu))
    assert state == {"load_1m_start": 0.25, "load_1m_end": 1.75, "cpu_mhz_start": 3500.0, "cpu_mhz_end": 2900.0,
                     "steal_fraction": round(100 / 450, 4), "busy_fraction": round(1 - 100 / 450, 4)}
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = machine.snapshot(empty, empty)
    assert nothing == machine.Snapshot(None, None, None) and machine.state(nothing, nothing)["steal_fraction"] is None
