"""Every input a user can get wrong ends in one line on stderr, exit code 2, no traceback, nothing lost.

Most cases run `cli.main(argv)` in-process (fast); a few run `python -m xpubench` to prove the real
process exits 2 without a traceback. `python tests/test_bad_input.py` prints docs/bad-input.md's tables
from the real messages: the first ones from this module's cases, then the generated sections (issue 51's
rows: tests/bad_input_doc.py, whose cases their own test modules run), which a test compares with the doc.
"""

import errno
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from xpubench import cli
from xpubench.results import store
from xpubench.results.schema import SCHEMA_VERSION

CASE = {"workload": "matmul", "backend": "numpy", "device": "cpu", "mode": "matmul", "precision": "fp32", "size": 64,
        "run_id": "r1", "key": "matmul/numpy/cpu/matmul/fp32/n64"}
RESULT = {"schema_version": SCHEMA_VERSION, "status": "ok", "case": CASE, "metrics": {"warm_s": 0.001}}
FILES = {
    "malformed.toml": 'workload = ["matmul"\n',
    "binary.toml": b"\xff\xfe\x00\x01\x89PNG",
    "unknown.toml": 'workload = "matmul"\nbatchsize = 64\n',
    "badvalue.toml": 'workload = "selftest"\nbatch_size = ["big"]\n',
    "badtimeout.toml": 'workload = "selftest"\ntimeout = "soon"\n',
    "badprocesses.toml": 'workload = "selftest"\nprocesses = 0\n',
    "empty.jsonl": "",
    "notjson.jsonl": "time,value\n1,2\n",
    "noschema.jsonl": '{"status": "ok"}\n',
    "v0.jsonl": '{"schema_version": 0}\n',
    "future.jsonl": json.dumps({**RESULT, "schema_version": SCHEMA_VERSION + 1}) + "\n",
    "results.jsonl": json.dumps(RESULT) + "\n",
    "resumable.jsonl": "<html>not results</html>\n",
    "resumable.jsonl.plan.json": '{"plan_version": 1, "cases": []}',
    "noplan.jsonl": json.dumps(RESULT) + "\n",
    "futureplan.jsonl": "",
    "futureplan.jsonl.plan.json": '{"plan_version": 99, "cases": []}',
    "badprices.toml": 'cpu = 0.10\ngpu = "cheap"\n',
    "badprices.json": "{cpu: 0.10}",
    "pricestable.toml": 'workload = "matmul"\nprices = 3\n',
    "model.py": "def build():\n    return None\n",
    "deep.jsonl": json.dumps(RESULT)[:-1] + ', "deep": ' + "[" * 1000 + "]" * 1000 + "}\n",
    "nan.jsonl": json.dumps({**RESULT, "metrics": {"warm_s": float("nan")}}) + "\n",
    "huge.jsonl": json.dumps(RESULT).replace('"warm_s": 0.001', '"warm_s": 1e400') + "\n",
    "text.jsonl": json.dumps({**RESULT, "metrics": {"warm_s": "fast"}}) + "\n",
    "negative.jsonl": json.dumps({**RESULT, "duration_s": -3.0}) + "\n",
    "deepplan.jsonl": "",
    "deepplan.jsonl.plan.json": "[" * 1000 + "]" * 1000,
    "deep.toml": "workload = " + "[" * 1000 + "]" * 1000 + "\n",
    "deepprices.json": "[" * 1000 + "]" * 1000,
    "deepenv.json": "[" * 1000 + "]" * 1000,
    "README.md": "# my notes\n",
}

# (id, argv with {tmp} for the folder holding FILES, what the line must say)
CASES = [
    ("unknown workload", "run -w resnet9000", "unknown workload 'resnet9000'; choose from: matmul"),
    ("unknown backend", "run -b tensorflow", "unknown backend 'tensorflow'; choose from: numpy, torch, jax"),
    ("unknown dtype", "run -w matmul -b numpy --dtype fp64", "unknown precision 'fp64'"),
    ("unknown mode", "run -w mnist_cnn --mode dream", "unknown mode 'dream'"),
    ("batch size 0", "run -w mnist_cnn --batch-size 0", "batch size must be a positive whole number, got 0"),
    ("batch size negative", "run -w mnist_cnn --batch-size=-32", "batch size must be a positive whole number"),
    ("batch size not a number", "run -w mnist_cnn --batch-size 32,big", "comma-separated list of numbers"),
    ("matrix size 0", "run -w matmul --size 0", "matrix size must be a positive whole number"),
    ("empty list", "run -w matmul -d ,", "empty device list"),
    ("epochs 0", "run -w mnist_cnn --epochs 0", "epochs must be a positive whole number, got 0"),
    ("training samples below one batch", "run -w mnist_cnn -b torch --batch-size 64,256 --train-samples 100 --dry-run",
     ("--train-samples 100 is less than one global batch (batch x devices) of mnist_cnn/torch/cpu/train/fp32/b256: "
      "no step to time; give --train-samples 256 or more, or a smaller --batch-size")),
    ("target on synthetic data", "run -w mnist_cnn -b torch --target accuracy=0.975 --data synthetic",
     "a quality target needs real data"),
    ("target not METRIC=VALUE", "run -w mnist_cnn --target fast --data real --data-dir {tmp}",
     "--target must be METRIC=VALUE with METRIC one of accuracy, mse, val_loss"),
    ("target accuracy in percent", "run -w mnist_cnn --target accuracy=97.5 --data real --data-dir {tmp}",
     "accuracy is a fraction in (0, 1]"),
    ("eval-every without a target", "run -w mnist_cnn --eval-every 50", "give --target METRIC=VALUE"),
    ("config missing", "run --config {tmp}/nope.toml", "does not exist"),
    ("config malformed", "run --config {tmp}/malformed.toml", "is not valid TOML"),
    ("config binary", "run --config {tmp}/binary.toml", "is not a text (UTF-8) file"),
    ("config unknown key", "run --config {tmp}/unknown.toml", "unknown option(s) batchsize; known:"),
    ("config bad value", "run --config {tmp}/badvalue.toml", "batch size must be a positive whole number"),
    ("config bad timeout", "run --config {tmp}/badtimeout.toml", "timeout must be a number of seconds"),
    ("config processes 0", "run --config {tmp}/badprocesses.toml", "processes must be a whole number of at least 1"),
    ("--processes 0", "run -w selftest --processes 0", "--processes must be a whole number of at least 1"),
    ("--resume with --processes", "run --resume {tmp}/results.jsonl --processes 2", "drop --processes"),
    ("data dir missing", "run -w mnist_cnn -b torch --data real --data-dir {tmp}/nope",
     "data directory {tmp}/nope does not exist"),
    ("results file empty", "report {tmp}/empty.jsonl", "empty.jsonl is empty"),
    ("results file not JSON", "compare {tmp}/notjson.jsonl {tmp}/results.jsonl", "not an xpubench results file"),
    ("results file missing", "report {tmp}/nope.jsonl", "does not exist"),
    ("results without schema", "report {tmp}/noschema.jsonl", "no schema_version"),
    ("results of unknown schema", "compare {tmp}/v0.jsonl {tmp}/results.jsonl", "unknown schema version 0"),
    ("results from the future", "report {tmp}/future.jsonl", "is newer than this xpubench reads (3); upgrade"),
    ("resume: not results", "run --resume {tmp}/resumable.jsonl", "not an xpubench results file"),
    ("resume: no such file", "run --resume {tmp}/nope.jsonl", "cannot resume"),
    ("resume: plan missing", "run --resume {tmp}/noplan.jsonl", "its plan noplan.jsonl.plan.json is missing"),
    ("resume: future plan", "run --resume {tmp}/futureplan.jsonl", "plan version 99"),
    ("output folder missing", "run -w matmul -b numpy -o {tmp}/nope/r.jsonl", "folder {tmp}/nope does not exist"),
    ("output is a folder", "run -w matmul -b numpy -o {tmp}", "it is a folder"),
    ("output holds results", "run -w matmul -b numpy -o {tmp}/results.jsonl", "already holds results"),
    ("report output folder missing", "report {tmp}/results.jsonl -o {tmp}/nope/r.html", "does not exist"),
    ("report over its input", "report {tmp}/results.jsonl -o {tmp}/results.jsonl",
     "is one of the results files being read"),
    ("compare over results", "compare {tmp}/results.jsonl {tmp}/results.jsonl -o {tmp}/noplan.jsonl --force",
     "holds xpubench results"),
    ("report over another file", "report {tmp}/results.jsonl -o {tmp}/README.md", "was not written by xpubench"),
    ("report to /dev/null", "report {tmp}/results.jsonl -o /dev/null", "it is a device, not a regular file"),
    ("results: /dev/zero", "report /dev/zero", "results file /dev/zero is a device, not a regular file"),
    ("results nested 1000 deep", "report {tmp}/deep.jsonl", "nested too deeply"),
    ("results with NaN", "compare {tmp}/nan.jsonl {tmp}/results.jsonl", "NaN is not a JSON number"),
    ("results: number too large", "report {tmp}/huge.jsonl", "too large"),
    ("results: text for a number", "report {tmp}/text.jsonl", "record.metrics.warm_s must be a number"),
    ("results: negative time", "report {tmp}/negative.jsonl", "record.duration_s must be a number of at least 0"),
    ("resume: plan nested", "run --resume {tmp}/deepplan.jsonl", "nested too deeply"),
    ("config nested", "run --config {tmp}/deep.toml", "nested too deeply"),
    ("--prices nested", "run -w matmul -b numpy --prices {tmp}/deepprices.json", "nested too deeply"),
    ("--env-file nested", "run --dry-run --env-file {tmp}/deepenv.json", "nested too deeply"),
    ("output not results", "run -w matmul -b numpy -o {tmp}/README.md", "is not an xpubench results file"),
    ("output /dev/null", "run -w matmul -b numpy -o /dev/null", "it is a device, not a regular file"),
    ("--dry-run --timeout 0", "run -w selftest --dry-run --timeout 0", "--timeout must be a number of seconds"),
    ("--allow-changed-model without --resume", "run -w matmul --allow-changed-model", "goes with --resume"),
    ("--resume with --workload", "run --resume {tmp}/results.jsonl -w matmul", "drop --workload"),
    ("--scaling with --devices", "run -w mnist_cnn -b torch --scaling --devices 2", "drop --devices"),
    ("--save-weights is a file", "run -w imdb_lstm --mode infer --save-weights {tmp}/results.jsonl",
     "that is a file, not a folder"),
    ("--devices 0", "run -w mnist_cnn --devices 0", "--devices: must be a whole number of at least 1"),
    ("--devices not a number", "run -w mnist_cnn --devices many", "--devices: must be a whole number"),
    ("--memory-limit not a size", "run -w selftest --memory-limit lots", "not a memory size: 'lots'"),
    ("--memory-limit too small", "run -w selftest --memory-limit 1M", "too small"),
    ("--timeout 0", "run -w selftest --timeout 0", "--timeout must be a number of seconds above 0"),
    ("--timeout negative", "run -w selftest --timeout=-5", "--timeout must be a number of seconds above 0"),
    ("--timeout not a number", "run -w selftest --timeout soon", "not a number of seconds"),
    ("unknown selftest", "run --selftest explode", "unknown selftest behaviour 'explode'"),
    ("--process-id out of range", "run -w mnist_cnn --num-processes 2 --process-id 2", "out of range"),
    ("--coordinator not HOST:PORT", "run -w mnist_cnn --num-processes 2 --coordinator host0", "HOST:PORT"),
    ("--price-per-hour without =", "run -w matmul -b numpy --price-per-hour gpu", "give DEVICE=USD_PER_HOUR"),
    ("--price-per-hour not a number", "run -w matmul -b numpy --price-per-hour gpu=cheap",
     "gpu: not a price in US dollars per hour: 'cheap'"),
    ("--price-per-hour negative", "run -w matmul -b numpy --price-per-hour cpu=-0.5",
     "price for cpu must be US dollars per hour, 0 or more, got -0.5"),
    ("--price-per-hour unknown device", "run -w matmul -b numpy --price-per-hour xpu=1",
     "prices: unknown device 'xpu'"),
    ("--price-per-hour one device twice", "run -w matmul -b numpy --price-per-hour gpu=1 --price-per-hour cuda=2",
     "prices: gpu is priced twice (gpu and cuda)"),
    ("--prices file missing", "run -w matmul -b numpy --prices {tmp}/nope.toml",
     "prices file {tmp}/nope.toml does not exist"),
    ("--prices not TOML", "run -w matmul -b numpy --prices {tmp}/malformed.toml", "is not valid TOML"),
    ("--prices not JSON", "run -w matmul -b numpy --prices {tmp}/badprices.json", "badprices.json: not JSON"),
    ("--prices bad value", "run -w matmul -b numpy --prices {tmp}/badprices.toml",
     "price for gpu must be US dollars per hour, 0 or more, got 'cheap'"),
    ("config prices not a table", "run --config {tmp}/pricestable.toml", "prices: must be a table"),
    ("--budget 0", "run -w matmul -b numpy --budget 0", "--budget must be a number of seconds above 0"),
    ("--budget not a number", "run -w matmul -b numpy --budget soon", "--budget: not a number of seconds: 'soon'"),
    ("--resume with --budget", "run --resume {tmp}/results.jsonl --budget 60", "drop --budget"),
    ("--model file missing", "run --model {tmp}/nope.py:build", "model file {tmp}/nope.py does not exist"),
    ("--model without a function", "run --model {tmp}/model.py", "--model must be FILE.py:FUNCTION"),
    ("--model function missing", "run --model {tmp}/model.py:make", "defines no function 'make'"),
    ("--model bad input shape", "run --model {tmp}/model.py:build --input-shape 28,x", "input shape must be whole"),
    ("--model bad task", "run --model {tmp}/model.py:build --task classes:1", "at least 2 classes"),
    ("--input-shape without --model", "run -w matmul --input-shape 28,28", "give --model FILE.py:FUNCTION too"),
    ("--preset unknown", "run -w gpt --preset huge", "invalid choice: 'huge'"),
    ("--new-tokens 1", "run -w gpt --new-tokens 1", "gpt: new_tokens must be at least 2"),
    ("--weights not a directory", "run --weights {tmp}/nowhere", "--weights {tmp}/nowhere: not a directory"),
    ("--weights without config.json", "run --weights {tmp}", "config.json"),
    ("--weights and --preset", "run --weights {tmp} --preset llama-1b", "drop --preset"),
    ("--preset of another workload", "run -w gpt --preset smollm-135m", "gpt: unknown preset 'smollm-135m'"),
    ("--prompt-len past the context", "run -w llama --prompt-len 2000 --new-tokens 100",
     "exceed the model's 2048 positions"),
    ("unknown flag", "run --fast", "unrecognized arguments: --fast"),
    ("unknown command", "bench", "invalid choice: 'bench'"),
]
# these need the machine's environment (device detection)
ENV_CASES = [
    ("absent device", "run -w matmul -b torch -d cuda", "device 'cuda' is not available to torch on this machine"),
    ("absent device (jax tpu)", "run -w matmul -b jax -d tpu",
     "device 'tpu' is not available to jax on this machine"),
    ("unknown device name", "run -w matmul -b numpy -d quantum",
     "unknown device 'quantum' (expected cpu, gpu, gpu:N, cuda:N, tpu, tpu:N or mps)"),
    ("empty sweep", "run -w mnist_cnn -b numpy", "the sweep is empty"),
    ("no default target", "run -w weather_gru -b torch --mode time-to-target --data real --data-dir {tmp}",
     "weather_gru has no default target (defaults: mnist_cnn, cifar10_resnet, imdb_lstm): give --target"),
    ("--devices more than exist", "run -w matmul -b torch --devices 64", "torch sees only"),
    ("several processes, no coordinator", "run -w mnist_cnn -b torch --num-processes 2", "needs --coordinator"),
    ("matmul across hosts", "run -w matmul -b jax --num-processes 2 --coordinator 127.0.0.1:29500 --process-id 1",
     "matmul runs on one device"),
    ("bad data inside a case", "run --selftest baddata -b numpy --no-progress -o {tmp}/data.jsonl",
     "selftest: data file is corrupt (deliberate); fix or delete it"),
    # issue 31: what a run accepts its readers accept (results/validate.py, both directions); repeated flags
    ("--time-budget above 1e100", "run -w matmul -b numpy --size 64 --time-budget 1e101 --dry-run",
     "a results file could not hold this case (time_budget_s must be a finite number of at most 1e+100"),
    ("--seed 2**63", "run -w matmul -b numpy --size 64 --seed 9223372036854775808 --dry-run",
     "(seed must be a whole number of at least -9223372036854775808 and at most 9223372036854775807"),
    ("--batch-size of 23 digits", "run -w mnist_cnn -b torch --batch-size 99999999999999999999999 --dry-run",
     "(batch_size must be a whole number of at least 1 and at most 9223372036854775807"),
    ("--price-per-hour above 1e100", "run -w matmul -b numpy --size 64 --price-per-hour cpu=1e101 --dry-run",
     "(price_per_hour must be a finite number of at most 1e+100"),
    ("--timeout above 1e100", "run -w matmul -b numpy --timeout 1e101", "(at most 1e+100), got 1e+101"),
    ("--memory-limit of 23 digits", "run -w matmul -b numpy --memory-limit 99999999999999999999999",
     "--memory-limit must be below 8E"),
    ("a flag given twice", "run -w matmul -b numpy --seed 1 --seed 2 --dry-run",
     "argument --seed: given twice (1, then 2): give it once"),
]


@pytest.fixture
def tmp(tmp_path):
    for name, content in FILES.items():
        (tmp_path / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return tmp_path


@pytest.fixture
def machine(detected_once):
    """The machine detected once per test run (conftest.detected_once)."""
    return detected_once


def run_cli(argv: str, tmp: Path, capsys) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = cli.main(shlex.split(argv.format(tmp=tmp)))
    return code, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def check_one_line(code: int, lines: list[str], says: str) -> None:
    assert code == 2, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith("xpubench: error: "), lines
    assert says in lines[0], lines
    assert "Traceback" not in lines[0]


def snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


SLOW_CASES = {"--save-weights is a file"}   # over 1 s: builds the model to check the folder (slow: not the quick loop)


@pytest.mark.parametrize("argv,says", [pytest.param(*c[1:], id=c[0], marks=[pytest.mark.slow] * (c[0] in SLOW_CASES))
                                       for c in CASES])
def test_bad_input_is_one_line_and_exit_2(argv, says, tmp, capsys, detected_once):   # detected: --save-weights
    before = snapshot(tmp)
    code, lines = run_cli(argv, tmp, capsys)
    check_one_line(code, lines, says.format(tmp=tmp))
    assert snapshot(tmp) == before  # nothing already written is touched


# the ENV_CASES that ask for a device this machine must not have: (backend, device id)
ABSENT = {"absent device": ("torch", "gpu:0"), "absent device (jax tpu)": ("jax", "tpu:0")}


def skip_if_present(name: str, env: dict) -> None:
    from xpubench.devices.detect import available_devices

    if name in ABSENT and ABSENT[name][1] in available_devices(env, ABSENT[name][0]):
        pytest.skip(f"{ABSENT[name][1]} is present here")


@pytest.mark.parametrize("name,argv,says", ENV_CASES, ids=[c[0] for c in ENV_CASES])
def test_bad_input_needing_the_machine(name, argv, says, tmp, capsys, machine):
    skip_if_present(name, machine)
    before = snapshot(tmp)
    code, lines = run_cli(argv, tmp, capsys)
    check_one_line(code, lines, says.format(tmp=tmp))
    after = snapshot(tmp)
    assert {name: after.get(name) for name in before} == before  # files already written are untouched


def test_absent_device_writes_nothing(tmp, capsys, machine):
    skip_if_present("absent device", machine)
    before = snapshot(tmp)
    out = tmp / "absent.jsonl"
    code, lines = run_cli(f"run -w matmul -b torch -d cuda --no-progress -o {out}", tmp, capsys)
    check_one_line(code, lines, "device 'cuda' is not available to torch on this machine")
    assert not out.exists() and not Path(f"{out}.plan.json").exists()  # neither results nor a plan
    assert snapshot(tmp) == before


def test_unreadable_config(tmp, capsys, monkeypatch):
    real = os.open

    def denied(path, *a, **kw):
        if Path(path).name == "locked.toml":
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, *a, **kw)

    (tmp / "locked.toml").write_text('workload = "matmul"\n')
    monkeypatch.setattr(os, "open", denied)
    check_one_line(*run_cli("run --config {tmp}/locked.toml", tmp, capsys), "is unreadable: Permission denied")


def test_default_data_dir_missing(tmp, capsys, monkeypatch):
    monkeypatch.setenv("XPUBENCH_DATA_DIR", str(tmp / "absent"))
    check_one_line(*run_cli("run -w mnist_cnn -b torch --data real", tmp, capsys),
                   f"data directory {tmp}/absent does not exist")


def test_output_without_permission(tmp, capsys, monkeypatch):
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if "locked" in str(p) else real(p, mode, **kw))
    (tmp / "locked").mkdir()
    check_one_line(*run_cli("run -w matmul -b numpy -o {tmp}/locked/r.jsonl", tmp, capsys), "permission denied")


@pytest.mark.slow
def test_disk_full_while_appending_loses_nothing(tmp, capsys, monkeypatch, machine):
    out = tmp / "full.jsonl"
    real_fsync, calls = os.fsync, []

    def fsync(fd):
        if os.path.realpath(f"/proc/self/fd/{fd}") == str(out.resolve()):
            calls.append(fd)
            if len(calls) == 2:
                raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    # one process a case (the resume keeps the plan's): what is tested is the append, not the processes
    code, lines = run_cli(f"run --selftest ok,nan,sleep -b numpy --processes 1 --no-progress -o {out}", tmp, capsys)
    check_one_line(code, lines, f"cannot append to {out}: disk full; earlier results are intact")
    assert f"--resume {out}" in lines[0]
    saved = store.load_file(out)
    assert [r.case.options["behaviour"] for r in saved.results] == ["ok"] and not saved.warnings
    fallback = next(tmp.glob("full.jsonl.unsaved-*.jsonl"))
    assert str(fallback) in lines[0]
    assert [r.case.options["behaviour"] for r in store.load_file(fallback).results] == ["nan"]
    monkeypatch.setattr(os, "fsync", real_fsync)  # space freed: resume finishes the plan
    assert cli.main(["run", "--resume", str(out), "--no-progress"]) == 0
    assert [r.case.options["behaviour"] for r in store.load_file(out).results] == ["ok", "nan", "sleep"]


def idx(magic: int, dims: tuple, body: int | None = None) -> bytes:
    import struct

    n = 1
    for d in dims:
        n *= d
    return struct.pack(f">I{len(dims)}I", magic, *dims) + bytes(n if body is None else body)


# bad dataset files: (workload, {file: content}, what the one line says); read inside the worker
DATA_CASES = {
    "IDX bad magic": ("mnist_cnn", {"train-images-idx3-ubyte": idx(1234, (10, 28, 28)),
                                    "train-labels-idx1-ubyte": idx(2049, (10,))}, "is not an IDX images file"),
    "IDX truncated": ("mnist_cnn", {"train-images-idx3-ubyte": idx(2051, (10, 28, 28), body=100),
                                    "train-labels-idx1-ubyte": idx(2049, (10,))}, "truncated"),
    "IDX without partner": ("mnist_cnn", {"train-images-idx3-ubyte": idx(2051, (10, 28, 28))}, "no partner"),
    "IDX dimensions overflow": ("mnist_cnn", {"train-images-idx3-ubyte": idx(2051, (2**16, 2**16, 2**32 - 1), body=64),
                                              "train-labels-idx1-ubyte": idx(2049, (10,))}, "more than xpubench reads"),
    "CIFAR wrong size": ("cifar10_resnet", {"data_batch_1.bin": bytes(3000)}, "CIFAR-10 records"),
    "CSV missing columns": ("weather_gru", {"weather.csv": "Date Time\n01.01.2009 00:00:00\n"}, "column"),
    "CSV missing values": ("weather_gru", {"weather.csv": "Date Time,p,T\n01.01.2009 00:00:00,1,\n"},
                           "missing value"),
}


DATASET_OF = {"mnist_cnn": "mnist", "cifar10_resnet": "cifar10", "weather_gru": "weather"}


def _spec(workload: str):
    """The workload's spec, its dataset key pinned to the loader these files are for."""
    import dataclasses

    from xpubench.workloads import get_workload

    try:
        spec = get_workload(workload).spec
    except ImportError:
        pytest.skip(f"workload {workload} is not written yet")
    return dataclasses.replace(spec, dataset=DATASET_OF[workload])


@pytest.mark.parametrize("name", DATA_CASES)
def test_bad_data_file_is_one_line(name, tmp_path):
    from xpubench import data
    from xpubench.errors import UserError

    workload, files, says = DATA_CASES[name]
    for file, content in files.items():
        (tmp_path / file).write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(UserError) as err:
        data.load_real(_spec(workload), tmp_path, train_samples=8, eval_samples=2)
    assert says in str(err.value) and "\n" not in str(err.value)


def data_run_argv(name: str, root: Path, backend: str = "torch") -> str:
    """Writes DATA_CASES[name]'s files where ``--data-dir root`` looks for its dataset (root/mnist,
    root/cifar10, root/weather) and returns the `xpubench run` arguments that read them with ``backend``."""
    workload, files, _ = DATA_CASES[name]
    folder = root / DATASET_OF[workload]
    folder.mkdir(parents=True)
    for file, content in files.items():
        (folder / file).write_bytes(content if isinstance(content, bytes) else content.encode())
    return (f"run -w {workload} -b {backend} --data real --data-dir {root} --epochs 1 --steps 1 --batch-size 4 "
            f"--train-samples 8 --eval-samples 2 --no-progress -o {root}/data-run.jsonl")


CLI_DATA_CASES = {"IDX bad magic": "train-images-idx3-ubyte is not an IDX images file",
                  "CIFAR wrong size": "data_batch_1.bin has 3000 bytes, not a whole number of 3073-byte "
                                      "CIFAR-10 records",
                  "CSV missing columns": "weather.csv has 1 column(s): expected a date-time column"}


@pytest.mark.slow
@pytest.mark.parametrize("name", CLI_DATA_CASES)
def test_bad_data_file_through_the_cli_is_the_case_result_and_exit_2(name, tmp_path, capsys, machine):
    """The JAX cases: both frameworks' trainers read the data first (harness/setup.py training_setup) and a JAX
    worker starts in about half the CPU time of a torch one (docs/bad-input.md's table shows torch's)."""
    workload = DATA_CASES[name][0]
    _spec(workload)
    argv = data_run_argv(name, tmp_path, "jax")
    code, lines = run_cli(argv, tmp_path, capsys)
    says = CLI_DATA_CASES[name]
    check_one_line(code, lines, says)
    assert lines[0].startswith(f"xpubench: error: {workload}/jax/cpu/")  # names the case
    (result,) = store.load_file(tmp_path / "data-run.jsonl").results  # the failure is also the case's result
    assert result.status == "error" and says in result.message
    assert result.metrics["error_type"] == "UserError"


SUBPROCESS = ["unknown workload", "config malformed", "results file not JSON", "data dir missing",
              "--timeout 0"]


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] * (n != "results file not JSON"))
                                  for n in SUBPROCESS])   # over 1 s each but the one that reads no framework
def test_real_process_exits_2_without_traceback(name, tmp):
    argv, says = next(c[1:] for c in CASES if c[0] == name)
    proc = subprocess.run([sys.executable, "-m", "xpubench", *shlex.split(argv.format(tmp=tmp))],
                          capture_output=True, text=True, timeout=60, check=False)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    check_one_line(proc.returncode, lines, says.format(tmp=tmp))
    assert "Traceback" not in proc.stderr + proc.stdout


def markdown_table() -> str:
    """The table of docs/bad-input.md, from the real messages."""
    import contextlib
    import io
    import tempfile

    rows = ["| input | command | message (stderr) | exit code |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for name, content in FILES.items():
            (tmp / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        for name, argv, _ in CASES + ENV_CASES:
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = cli.main(shlex.split(argv.format(tmp=tmp)))
            line = err.getvalue().strip().splitlines()[-1].replace(str(tmp), "DIR").replace("|", "\\|")
            rows.append(f"| {name} | `xpubench {argv.format(tmp='DIR')}` | {line} | {code} |")
        from test_hostile_checkpoints import markdown_rows  # checkpoint folders, --model packages (issue 31)

        rows += markdown_rows()
        note = ("Bad dataset files are found inside the case's worker: the message becomes the case's "
                "`error` result and `xpubench run` ends with `xpubench: error: CASE: message` and exit code 2.")
        rows += ["", note, "", "| input | command | message (stderr) | exit code |", "|---|---|---|---|"]
        for name in DATA_CASES:
            root = tmp / name.replace(" ", "_")
            argv = data_run_argv(name, root)
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = cli.main(shlex.split(argv))
            line = err.getvalue().strip().splitlines()[-1].replace(str(root), "DIR").replace("|", "\\|")
            rows.append(f"| {name} | `xpubench {argv.replace(str(root), 'DIR')}` | {line} | {code} |")
    return "\n".join(rows)


@pytest.mark.slow   # every generated row runs again (each is also its own module's test)
def test_the_generated_sections_of_the_doc_are_current():
    """docs/bad-input.md's tables between `<!-- generated: NAME -->` markers are what their cases print
    (tests/bad_input_doc.py); `python tests/bad_input_doc.py --write` rewrites them."""
    from bad_input_doc import DOC, SECTIONS, in_doc, section

    doc = in_doc(DOC.read_text(encoding="utf-8"))
    assert set(SECTIONS) <= set(doc), f"sections without markers in {DOC}: {sorted(set(SECTIONS) - set(doc))}"
    for name in SECTIONS:
        assert doc[name] == section(name), f"{DOC}'s section {name} is stale: python tests/bad_input_doc.py --write"


if __name__ == "__main__":
    from bad_input_doc import SECTIONS, marked, section

    print(markdown_table())
    for name in SECTIONS:   # the generated sections (docs/bad-input.md's markers)
        print("\n" + marked(name, section(name)))
