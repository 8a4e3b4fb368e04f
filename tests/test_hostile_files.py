"""Files a careless user or an attacker hands over: every one ends in one line on stderr and exit code 2
(or success), never a traceback, a hang, a memory blow-up or a lost result (issue 27).

The records come from tests/data/records/seed.jsonl: real results of one small run on this kind of
machine (matmul, MNIST CNN training with its misclassified-image gallery and inference, gpt generation,
selftest failures; the numpy matmul carries a recorded ceiling), each record then made hostile in one way.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import report_runs

from xpubench import api, cli
from xpubench.errors import UserError

SEED = Path(__file__).parent / "data" / "records" / "seed.jsonl"
RECORDS = [json.loads(line) for line in SEED.read_text().splitlines()]
MATMUL = next(r for r in RECORDS if r["case"]["key"].startswith("matmul/numpy"))
TRAIN = next(r for r in RECORDS if r["case"]["mode"] == "train" and r["artifacts"].get("gallery"))


def run_cli(capsys, argv: list) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return code, [line for line in captured.err.splitlines() if line.strip()]


def one_line(code: int, lines: list[str], says: str) -> None:
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("xpubench: error: "), lines
    assert says in lines[0], lines


def write_records(path: Path, *records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def changed(record: dict, dotted: str, value) -> dict:
    """A deep copy of ``record`` with the field at ``dotted`` (``metrics.warm_s``) set to ``value``."""
    out = copy.deepcopy(record)
    *parents, last = dotted.split(".")
    target = out
    for p in parents:
        target = target[int(p)] if isinstance(target, list) else target[p]
    target[int(last) if isinstance(target, list) else last] = value
    return out


# ---- 1. report and compare never write over results, nor over a file they did not write ---------------

@pytest.fixture
def results(tmp_path) -> tuple[Path, Path]:
    a = write_records(tmp_path / "a.jsonl", MATMUL)
    b = write_records(tmp_path / "b.jsonl", MATMUL)
    return a, b


@pytest.mark.parametrize("argv,says", [
    ("report {a} -o {a}", "a.jsonl is one of the results files being read"),
    ("report {a} -o {b}", "b.jsonl holds xpubench results"),
    ("report {a} -o {b} --force", "b.jsonl holds xpubench results"),
    ("report {a} -o {a}.plan.json", "holds xpubench results"),
    ("compare {a} {b} -o {b} --format md", "b.jsonl is one of the results files being read"),
    ("compare {a} {b} -o {a} --format json --force", "a.jsonl is one of the results files being read"),
    ("report {a} -o {dir}/README.md", "README.md exists and was not written by xpubench"),
    ("compare {a} {b} -o {dir}/README.md", "README.md exists and was not written by xpubench"),
    ("report {a} -o /dev/null", "cannot write the report to /dev/null: it is a device, not a regular file"),
    ("compare {a} {b} -o {dir}", "it is a folder"),
])
def test_report_and_compare_refuse_to_overwrite(argv, says, results, tmp_path, capsys):
    a, b = results
    (tmp_path / "README.md").write_text("# my notes\n")
    Path(f"{a}.plan.json").write_text('{"plan_version": 1, "cases": []}')
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    code, lines = run_cli(capsys, shlex.split(argv.format(a=a, b=b, dir=tmp_path)))
    one_line(code, lines, says)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


@pytest.mark.slow
@pytest.mark.parametrize("fmt,suffix", [("html", "html"), ("md", "md")])
def test_a_report_rewrites_its_own_output_and_force_replaces_another_file(fmt, suffix, results, tmp_path, capsys,
                                                                          monkeypatch):
    report_runs.quick_charts(monkeypatch)   # which files a report writes over is tested, not its charts' pixels
    a, _ = results
    out = tmp_path / f"report.{suffix}"
    assert run_cli(capsys, ["report", a, "-o", out, "--format", fmt])[0] == 0
    assert run_cli(capsys, ["report", a, "-o", out, "--format", fmt])[0] == 0   # xpubench wrote it: again is fine
    notes = tmp_path / f"notes.{suffix}"
    notes.write_text("mine\n")
    assert run_cli(capsys, ["report", a, "-o", notes, "--format", fmt])[0] == 2
    assert notes.read_text() == "mine\n"
    assert run_cli(capsys, ["report", a, "-o", notes, "--format", fmt, "--force"])[0] == 0
    assert "generator: xpubench" in notes.read_text()


@pytest.mark.parametrize("fmt", ["table", "md", "html", "json"])
def test_a_comparison_rewrites_its_own_output(fmt, results, tmp_path, capsys):
    a, b = results
    out = tmp_path / f"cmp.{fmt}"
    for _ in range(2):
        code, lines = run_cli(capsys, ["compare", a, b, "-o", out, "--format", fmt])
        assert code == 0, lines


def test_the_python_api_refuses_too(results, tmp_path):
    a, _b = results
    with pytest.raises(UserError, match="one of the results files being read"):
        api.report([a], a)
    assert a.read_text() == json.dumps(MATMUL) + "\n"


# ---- 3. hostile content: one line, exit 2, through every reader -------------------------------------------

HOSTILE_RECORDS = {
    "nested 1000 levels": None,   # written as raw text below
    "metric a string": changed(MATMUL, "metrics.warm_s", "fast"),
    "metric 10^400": changed(MATMUL, "metrics.warm_flops_per_s", 10 ** 400),
    "metric 1e400": None,
    "metric NaN": None,
    "ok with empty metrics": changed(MATMUL, "metrics", {}),
    "ok with all metrics null": changed(MATMUL, "metrics", {k: None for k in MATMUL["metrics"]}),
    "fingerprint a string": changed(MATMUL, "fingerprint", "vm"),
    "case size a string": changed(MATMUL, "case.size", "big"),
    "samples strings": changed(MATMUL, "samples.warm_s", ["0.1", "0.2"]),
    "gallery confidence a string": changed(TRAIN, "artifacts.gallery.0.confidence", "high"),
    "gallery label null": changed(TRAIN, "artifacts.gallery.0.label", None),
    "gallery pixel above 255": changed(TRAIN, "artifacts.gallery.0.image.0.0", 300),
    "negative time": changed(MATMUL, "metrics.cold_s", -0.5),
    "negative sample": changed(MATMUL, "samples.warm_s.0", -1e-3),
    "process past processes": changed(MATMUL, "process", 7),
    "a peak a list": changed(MATMUL, "fingerprint.backends.numpy.devices.0.peak_flops.fp32", [1]),
    "a ceiling a string": changed(MATMUL, "fingerprint.ceilings.ceilings.numpy/cpu/fp32.flops_per_s", "fast"),
    "fingerprint 30 levels deep": changed(MATMUL, "fingerprint.extra", json.loads(nested(30))),
}
RAW = {"nested 1000 levels": json.dumps(MATMUL)[:-1] + ', "deep": ' + nested(1000) + "}\n",
       "metric 1e400": json.dumps(MATMUL).replace('"warm_s": 0.', '"warm_s": 1e400, "x": 0.', 1) + "\n",
       "metric NaN": json.dumps(changed(MATMUL, "metrics.warm_cv", float("nan"))) + "\n"}
SAYS = {"nested 1000 levels": "JSON nested too deeply to read", "metric 1e400": "too large",
        "metric NaN": "NaN is not a JSON number", "metric a string": "metrics.warm_s must be a number",
        "ok with empty metrics": "metrics.warm_s (the time of an ok matmul result) must be a number of at least 1e-09",
        "fingerprint a string": "fingerprint must be a JSON object", "case size a string": "case.size must be",
        "gallery confidence a string": "confidence must be a number", "gallery label null": "label must not be null",
        "gallery pixel above 255": "at most 255", "negative time": "metrics.cold_s must be",
        "samples strings": "samples.warm_s[0] must be a number", "process past processes": "process 7",
        "fingerprint 30 levels deep": "nested more than 24 levels", "metric 10^400": "a number a float can hold"}


def hostile_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "hostile.jsonl"
    if name in RAW:
        path.write_text(RAW[name])
    else:
        write_records(path, HOSTILE_RECORDS[name])
    return path


@pytest.mark.parametrize("name", list(HOSTILE_RECORDS))
@pytest.mark.parametrize("command", ["report", "compare", "compare-b", "load"])
def test_hostile_results_are_one_line_and_exit_2(name, command, tmp_path, capsys):
    path = hostile_file(tmp_path, name)
    good = write_records(tmp_path / "good.jsonl", MATMUL)
    if command == "load":
        with pytest.raises(UserError) as err:
            api.load(path)
        assert "\n" not in str(err.value) and SAYS.get(name, "") in str(err.value)
        return
    argv = {"report": ["report", path, "-o", tmp_path / "r.html"], "compare": ["compare", path, good],
            "compare-b": ["compare", good, path]}[command]
    code, lines = run_cli(capsys, argv)
    one_line(code, lines, SAYS.get(name, "malformed result record"))
    assert not (tmp_path / "r.html").exists()


def test_hostile_results_through_resume(tmp_path, capsys):
    path = hostile_file(tmp_path, "nested 1000 levels")
    Path(f"{path}.plan.json").write_text(json.dumps({"plan_version": 1, "cases": [MATMUL["case"]]}))
    one_line(*run_cli(capsys, ["run", "--resume", path, "--no-progress"]), "nested too deeply")


@pytest.mark.parametrize("plan,says", [
    (nested(1000), "nested too deeply"),
    (json.dumps({"plan_version": 1, "cases": [{**MATMUL["case"], "workload": 3}]}), "plan.cases[0].workload must be"),
    ('{"plan_version": 1, "cases": "all"}', "plan.cases must be a list"),
    ('{"plan_version": 1, "cases": [], "settings": {"timeout_s": "soon"}}', "plan.settings.timeout_s"),
    ('{"plan_version": NaN, "cases": []}', "NaN is not a JSON number"),
    ("[" + json.dumps({**MATMUL["case"], "size": -4}) + "]", "plan.cases[0].size"),
])
def test_hostile_plan_sidecar(plan, says, tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    out.touch()
    Path(f"{out}.plan.json").write_text(plan)
    one_line(*run_cli(capsys, ["run", "--resume", out, "--no-progress"]), says)


@pytest.mark.parametrize("name,content,says", [
    ("deep.json", nested(1000), "nested too deeply"),
    ("deep.toml", "a = " + nested(1000) + "\n", "nested too deeply"),
    ("nan.json", '{"cpu": NaN}', "NaN is not a JSON number"),
    ("huge.json", '{"cpu": 1e400}', "too large"),
])
def test_hostile_prices_files(name, content, says, tmp_path, capsys):
    (tmp_path / name).write_text(content)
    one_line(*run_cli(capsys, ["run", "-w", "matmul", "-b", "numpy", "--prices", tmp_path / name]), says)


def test_hostile_config_and_env_file(tmp_path, capsys):
    (tmp_path / "deep.toml").write_text("workload = " + nested(1000) + "\n")
    one_line(*run_cli(capsys, ["run", "--config", tmp_path / "deep.toml"]), "nested too deeply")
    (tmp_path / "deep.json").write_text(nested(1000))
    one_line(*run_cli(capsys, ["run", "--dry-run", "--env-file", tmp_path / "deep.json"]), "nested too deeply")
    env = {"host": {"cpu": {"model": "x", "usable_cores": "two"}}, "backends": {}}
    (tmp_path / "env.json").write_text(json.dumps(env))
    one_line(*run_cli(capsys, ["run", "--dry-run", "--env-file", tmp_path / "env.json"]),
             "environment.host.cpu.usable_cores must be a whole number")


@pytest.mark.parametrize("content", [nested(1000), ('{"format": 1, "entries": [{"key": {}, "ceilings": '
                                     '{"numpy/cpu/fp32": {"backend": "numpy", "device": "cpu", "precision": "fp32", '
                                     '"flops_per_s": "fast"}}}]}')])
def test_a_hostile_ceilings_cache_is_a_note_and_rewritten(content, tmp_path):
    from xpubench.ceilings import cache

    path = tmp_path / "ceilings.json"
    path.write_text(content)
    entry, problem = cache.lookup({"hardware": {}, "software": {}}, path)
    assert entry is None and "is unreadable" in problem and "it will be rewritten" in problem


# ---- 4. not a regular file; a line without end ----------------------------------------------------------

def test_dev_zero_is_refused_at_once(capsys):
    started = time.monotonic()
    one_line(*run_cli(capsys, ["report", "/dev/zero"]), "results file /dev/zero is a device, not a regular file")
    assert time.monotonic() - started < 10


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("argv", ["report {f}", "compare {f} {f}", "run --resume {f}", "run --config {f}",
                                  "run -w matmul -b numpy --prices {f}", "run --dry-run --env-file {f}"])
def test_a_fifo_is_refused_without_waiting_for_a_writer(argv, tmp_path, capsys):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    result = {}
    worker = threading.Thread(target=lambda: result.update(out=run_cli(capsys, shlex.split(argv.format(f=fifo)))),
                              daemon=True)
    worker.start()
    worker.join(timeout=20)
    if worker.is_alive():   # it waits for a writer: release it so the test process can end, then fail
        with open(fifo, "w"):
            pass
        pytest.fail(f"{argv} hangs on a FIFO")
    one_line(*result["out"], "FIFO")


def test_a_line_longer_than_the_bound_is_refused_before_it_is_read(tmp_path, capsys, monkeypatch):
    from xpubench.results import store

    monkeypatch.setattr(store, "MAX_LINE", 1000)
    path = tmp_path / "long.jsonl"
    path.write_text('{"schema_version": 2, "x": "' + "y" * 5000)
    one_line(*run_cli(capsys, ["report", path]), "long.jsonl:1: a line longer than 1000 bytes")


# ---- 7. the smaller ones ---------------------------------------------------------------------------------

def test_chart_names_never_leave_the_files_folder(tmp_path, capsys, monkeypatch):
    report_runs.quick_charts(monkeypatch)   # where the chart files go, not what they show
    record = changed(TRAIN, "case.workload", "/../../escaped")
    path = write_records(tmp_path / "r.jsonl", record)
    out = tmp_path / "deep" / "report.md"
    out.parent.mkdir()
    assert run_cli(capsys, ["report", path, "-o", out])[0] == 0
    written = {p.relative_to(tmp_path) for p in tmp_path.rglob("*.png")}
    assert written and all(p.parts[:2] == ("deep", "report_files") for p in written), written


def test_duplicated_records_are_folded_with_a_warning(tmp_path):
    from xpubench.plan.resolve import recorded_case
    from xpubench.results import store

    path = write_records(tmp_path / "twice.jsonl", MATMUL, MATMUL)
    loaded = store.load_file(path, recorded_case)   # version 2 lines: the planner reads them (analysis.load)
    [result] = loaded.results
    assert len(result.runs) == 1 and "processes" not in result.metrics
    assert any("1 record(s) repeat a case's process" in w for w in loaded.warnings)


def test_run_output_must_be_a_new_or_empty_results_file(tmp_path, capsys):
    (tmp_path / "README.md").write_text("# notes\n")
    one_line(*run_cli(capsys, ["run", "-w", "matmul", "-b", "numpy", "-o", tmp_path / "README.md"]),
             "README.md is not empty and is not an xpubench results file")
    one_line(*run_cli(capsys, ["run", "-w", "matmul", "-b", "numpy", "-o", "/dev/null"]),
             "cannot write results to /dev/null: it is a device, not a regular file")
    assert not Path("/dev/null.plan.json").exists()


@pytest.mark.parametrize("flags,says", [("--timeout 0", "--timeout must be a number of seconds above 0"),
                                        ("--processes 0", "--processes must be a whole number of at least 1"),
                                        ("--memory-limit 1M", "too small"),
                                        ("-o /dev/null", "it is a device, not a regular file")])
def test_dry_run_refuses_what_the_run_refuses(flags, says, capsys):
    one_line(*run_cli(capsys, ["run", "-w", "selftest", "--dry-run", *flags.split()]), says)


def test_dry_run_estimate_counts_the_processes(capsys, tmp_path):
    machine = Path(__file__).parent / "data" / "machines" / "h100-sxm.json"
    texts = {}
    for k in (1, 4):
        assert cli.main(["run", "-w", "matmul", "-b", "torch", "--size", "4096", "--dry-run", "--env-file",
                         str(machine), "--processes", str(k)]) == 0
        texts[k] = capsys.readouterr().out
    assert "(1 worker process(es) per case;" in texts[1] and "(4 worker process(es) per case;" in texts[4]


@pytest.mark.slow
def test_real_process_reads_dev_zero_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "xpubench", "report", "/dev/zero"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [("xpubench: error: results file /dev/zero is a device, not a "
                                                "regular file")]


@pytest.mark.slow
def test_a_gzip_bomb_is_decompressed_only_as_far_as_the_header_allows(tmp_path):
    import gzip
    import struct

    from xpubench.data.core import read_bytes
    from xpubench.data.images import IDX_IMAGES_MAGIC, parse_idx, read_idx_bytes

    bomb = tmp_path / "train-images-idx3-ubyte.gz"
    with gzip.open(bomb, "wb") as fh:   # a 10-image header over 256 MiB of zeros (~250 KB on disk)
        fh.write(struct.pack(">IIII", IDX_IMAGES_MAGIC, 10, 28, 28))
        for _ in range(16):
            fh.write(bytes(16 << 20))
    data = read_idx_bytes(bomb, IDX_IMAGES_MAGIC)
    assert len(data) == 16 + 10 * 28 * 28 + 1   # the header, its data and one byte more: nothing else
    with pytest.raises(UserError, match="longer than its header says"):
        parse_idx(data, IDX_IMAGES_MAGIC, bomb)
    with pytest.raises(UserError, match="holds more than 1 MiB once decompressed"):
        read_bytes(bomb, limit=1 << 20)
