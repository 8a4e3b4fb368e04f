"""Issue 31, items 2, 3, 7 and 8: checkpoint folders whose files are not plain files, config.json values
that ended in tracebacks or were misread, a resume that mixed two checkpoints under one case, and a
``--model pkg.mod:fn`` whose package ran in xpubench's own process. Each is one line and exit code 2.

The folders of item 2 are opened in one child process (a FIFO read by the old code hung it beyond the
reach of Ctrl-C and SIGTERM, and /dev/zero filled its memory): it reports, per folder, the line, the
seconds and how far its peak memory grew. ``ROWS`` are docs/bad-input.md's rows of these items
(``python tests/test_bad_input.py`` prints them at the end of its first table).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import xpubench
from xpubench import cli
from xpubench.errors import UserError
from xpubench.workloads.llama import checkpoint as ck
from xpubench.workloads.llama.config import LlamaConfig, from_hf_config

TINY = LlamaConfig("tiny", n_layers=1, hidden_size=16, n_heads=2, n_kv_heads=1, head_dim=8, intermediate_size=32,
                   vocab_size=64, max_positions=128, tie_embeddings=True)
SRC = Path(xpubench.__file__).resolve().parents[1]   # child processes run the xpubench under test
MB = 1 << 20


def good(root: Path, shards: int = 1) -> Path:
    return ck.write_checkpoint(root, TINY, ck.random_hf_tensors(TINY), shards=shards)


def edit_json(path: Path, **changes) -> None:
    """Set keys of a JSON file; a value of type str starting with "RAW:" is written as that JSON text."""
    blob = json.loads(path.read_text())
    blob.update({k: v for k, v in changes.items() if not (isinstance(v, str) and v.startswith("RAW:"))})
    text = json.dumps(blob)
    for k, v in changes.items():
        if isinstance(v, str) and v.startswith("RAW:"):
            text = text[:-1] + f', "{k}": {v[4:]}}}'
    path.write_text(text)


def edit_index(root: Path, value) -> None:
    index = json.loads((root / ck.INDEX).read_text())
    index["weight_map"][next(iter(index["weight_map"]))] = value
    (root / ck.INDEX).write_text(json.dumps(index))


def replace(path: Path, make) -> None:
    path.unlink()
    make(path)


# ---- item 2: files that are not plain files ---------------------------------------------------------

def _fifo_weights(root):
    replace(good(root) / "model.safetensors", os.mkfifo)


def _fifo_config(root):
    replace(good(root) / "config.json", os.mkfifo)


def _zero_config(root):
    replace(good(root) / "config.json", lambda p: p.symlink_to("/dev/zero"))


def _zero_weights(root):
    replace(good(root) / "model.safetensors", lambda p: p.symlink_to("/dev/zero"))


def _huge_config(root):
    with open(good(root) / "config.json", "r+b") as fh:   # 300 MB: sparse, no disk used
        fh.truncate(300 * MB)


def _million_layers(root):
    edit_json(good(root) / "config.json", num_hidden_layers=10**6)


def _fifo_index(root):
    replace(good(root, shards=2) / ck.INDEX, os.mkfifo)


def _shard_outside(root):
    good(root, shards=2)
    (root.parent / "elsewhere.safetensors").write_bytes((root / "model-00001-of-00002.safetensors").read_bytes())
    edit_index(root, "../elsewhere.safetensors")


def _shard_absolute(root):
    edit_index(good(root, shards=2), "/dev/zero")


def _huge_header(root):
    with open(good(root) / "model.safetensors", "r+b") as fh:   # a header length of 2^40 bytes
        fh.write((1 << 40).to_bytes(8, "little"))


NOT_FILES = {   # name -> (make the folder, what the one line says)
    "weights a FIFO": (_fifo_weights, "model.safetensors is a FIFO (named pipe), not a regular file"),
    "config.json a FIFO": (_fifo_config, "config.json is a FIFO (named pipe), not a regular file"),
    "config.json -> /dev/zero": (_zero_config, "config.json is a device, not a regular file"),
    "weights -> /dev/zero": (_zero_weights, "model.safetensors is a device, not a regular file"),
    "config.json of 300 MB": (_huge_config, "config.json is larger than 1 MiB"),
    "10^6 layers": (_million_layers, "num_hidden_layers must be a whole number of at least 1 and at most 2048"),
    "shard index a FIFO": (_fifo_index, "model.safetensors.index.json is a FIFO (named pipe)"),
    "shard outside the folder": (_shard_outside, "a shard must be a file name inside the checkpoint folder"),
    "shard an absolute path": (_shard_absolute, "puts model.embed_tokens.weight in '/dev/zero': a shard must be"),
    "header of 2^40 bytes": (_huge_header, "its header claims 1,099,511,627,776 bytes"),
}

PROBE = textwrap.dedent("""
    import json, resource, sys, time
    from xpubench.errors import UserError
    from xpubench.workloads.llama.checkpoint import open_checkpoint

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for folder in sys.argv[1:]:
        began = time.monotonic()
        try:
            open_checkpoint(folder)
            said, kind = "opened", None
        except UserError as exc:
            said, kind = str(exc), "UserError"
        except BaseException as exc:
            said, kind = f"{type(exc).__name__}: {exc}", "other"
        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024
        print(json.dumps({"folder": folder, "said": said, "kind": kind, "s": time.monotonic() - began,
                          "grew": grew}), flush=True)
""")


def probe(folders: list[Path], timeout: float = 120) -> dict[str, dict]:
    """Each folder through open_checkpoint in one child process (its address space capped at 4 GiB, so
    an endless read ends there): folder -> {said, kind, s, grew (bytes of peak memory)}."""
    def cap():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", PROBE, *map(str, folders)], capture_output=True, text=True,
                          timeout=timeout, env=env, preexec_fn=cap, check=False)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {line["folder"]: line for line in lines}


@pytest.fixture(scope="module")
def not_files(tmp_path_factory) -> dict[str, dict]:
    base = tmp_path_factory.mktemp("not-files")
    folders = {}
    for i, (name, (make, _)) in enumerate(NOT_FILES.items()):
        folders[name] = base / f"case{i}" / "ckpt"
        make(folders[name])
    try:
        found = probe(list(folders.values()))
    except subprocess.TimeoutExpired:
        found = {}
    return {name: found.get(str(folder), {"said": "no answer within 120 s (a hang)", "kind": "hang"})
            for name, folder in folders.items()}


@pytest.mark.parametrize("name", NOT_FILES)
def test_a_checkpoint_file_that_is_not_a_plain_file_is_one_line_at_once(name, not_files):
    outcome, says = not_files[name], NOT_FILES[name][1]
    assert outcome["kind"] == "UserError", outcome
    assert says in outcome["said"] and "\n" not in outcome["said"], outcome
    assert outcome["s"] < 10, outcome
    assert outcome["grew"] < 200 * MB, outcome


def test_a_checkpoint_in_the_hugging_face_cache_layout_is_read_through_its_links(tmp_path):
    """Symlinks to regular files stay readable (the hub cache links every file to a blob)."""
    root = good(tmp_path / "snapshot", shards=2)
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    for file in root.iterdir():
        target = blobs / file.name
        file.rename(target)
        file.symlink_to(target)
    assert ck.open_checkpoint(root).config == ck.open_checkpoint(root).config
    assert set(ck.open_checkpoint(root).files.values()) <= {root / f.name for f in blobs.iterdir()}


@pytest.mark.slow
def test_a_fifo_checkpoint_through_the_cli_is_one_line_and_exit_2(tmp_path):
    _fifo_weights(tmp_path / "ckpt")
    proc = subprocess.run([sys.executable, "-m", "xpubench", "run", "--weights", str(tmp_path / "ckpt"), "--dry-run"],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(SRC)})
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "model.safetensors is a FIFO (named pipe), not a regular file" in lines[0]


# ---- item 3: config.json values ---------------------------------------------------------------------

BAD_VALUES = [   # (config.json change, what the line says)
    ({"quantization_config": "gptq"}, "quantized checkpoints (quantization_config 'gptq') are not supported"),
    ({"rope_scaling": "RAW:{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
      "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": Infinity}"}, "Infinity is not a JSON number"),
    ({"architectures": 7}, "architectures must be a list, got 7"),
    ({"tie_word_embeddings": "false"}, "tie_word_embeddings must be true or false, got 'false'"),
    ({"rope_scaling": "RAW:{\"rope_type\": \"llama3\", \"factor\": NaN, \"low_freq_factor\": 1.0, "
      "\"high_freq_factor\": 4.0}"}, "NaN is not a JSON number"),
    ({"rms_norm_eps": "1e-5"}, "rms_norm_eps must be a number"),
    ({"rms_norm_eps": 0}, "rms_norm_eps must be a number above 0, got 0"),
    ({"rope_theta": -1.0}, "rope_theta must be a number of at least 0"),
    ({"num_key_value_heads": 1.5}, "num_key_value_heads must be a whole number"),
    ({"max_position_embeddings": True}, "max_position_embeddings must be a whole number"),
    ({"vocab_size": 2**70}, "vocab_size must be a whole number of at least 1 and at most 16777216"),
    ({"hidden_act": 5}, "hidden_act must be text, got 5"),
    ({"architectures": ["LlamaForCausalLM", 3]}, "architectures[1] must be text, got 3"),
    ({"rope_scaling": "llama3"}, "rope_scaling must be a JSON object, got 'llama3'"),
    ({"rope_scaling": {"rope_type": 3}}, "rope_scaling.rope_type must be text, got 3"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0}},
     "needs low_freq_factor < high_freq_factor, got 4.0 and 1.0"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 0.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}},
     "rope_scaling.factor must be a number above 0, got 0.0"),
    ({"head_dim": 0}, "head_dim must be a whole number of at least 1"),
    ({"num_hidden_layers": None}, "lacks num_hidden_layers"),
]


@pytest.mark.parametrize("change, says", BAD_VALUES, ids=[str(c)[:60] for c, _ in BAD_VALUES])
def test_a_bad_config_value_is_one_line_naming_the_key(change, says, tmp_path):
    root = good(tmp_path / "ckpt")
    edit_json(root / "config.json", **change)
    with pytest.raises(UserError) as err:
        ck.open_checkpoint(root)
    assert says in str(err.value) and "\n" not in str(err.value), str(err.value)
    assert str(err.value).startswith(f"--weights {root}")


def test_a_weight_map_value_that_is_not_a_string_is_one_line(tmp_path):
    root = good(tmp_path / "ckpt", shards=2)
    for value, says in ((3, "weight_map.model.embed_tokens.weight must be text, got 3"),
                        ([], "weight_map.model.embed_tokens.weight must be text"),
                        ("", "a shard must be a file name inside the checkpoint folder"),
                        ("a\0b", "a shard must be a file name")):
        edit_index(root, value)
        with pytest.raises(UserError) as err:
            ck.open_checkpoint(root)
        assert says in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_nan_and_infinity_given_as_python_values_are_refused_too():
    """The API (from_hf_config of a dict) gets the same checks as a file: no NaN RoPE factor runs."""
    cfg = json.loads(json.dumps(ck.to_hf_config(TINY)))
    for rope in ({"rope_type": "llama3", "factor": float("nan"), "low_freq_factor": 1.0, "high_freq_factor": 4.0},
                 {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": float("inf")}):
        with pytest.raises(UserError, match="must be"):
            from_hf_config({**cfg, "rope_scaling": rope})
    with pytest.raises(UserError, match="rope_theta must be a finite number"):
        from_hf_config({**cfg, "rope_theta": float("inf")})


def test_tie_word_embeddings_false_is_read_as_false():
    cfg = ck.to_hf_config(TINY)
    assert from_hf_config({**cfg, "tie_word_embeddings": False}).tie_embeddings is False
    assert from_hf_config({**cfg, "tie_word_embeddings": True}).tie_embeddings is True


# ---- item 7: the plan pins the checkpoint --------------------------------------------------------

def planned(tmp_path, monkeypatch, weights: str = "ckpt"):
    from test_llama_plan import cpu_env

    from xpubench.plan import PlanRequest, build_cases

    monkeypatch.chdir(tmp_path)
    return build_cases(PlanRequest(workloads=["llama"], backends=["torch"], precisions=["fp32"],
                                   options={"weights": weights}), cpu_env())


def test_the_plan_pins_the_checkpoint_by_absolute_path_and_digest(tmp_path, monkeypatch):
    root = good(tmp_path / "ckpt")
    cases = planned(tmp_path, monkeypatch)
    assert cases
    for case in cases:
        assert case.options["weights"] == "ckpt" and "ckpt" not in case.key.split("/")   # as typed, not the key:
        assert f"ckpt@{ck.open_checkpoint(root).sha256[:12]}" in case.key.split("/")    # the model (its folder's
        #                                                                                  name) and its digest
        assert case.options["weights_path"] == str(root.resolve())
        assert case.options["weights_sha256"] == ck.open_checkpoint(root).sha256
        assert len(case.options["weights_sha256"]) == 64


def test_the_digest_follows_config_and_headers(tmp_path):
    from safetensors.numpy import save_file

    root = good(tmp_path / "ckpt")
    first = ck.open_checkpoint(root).sha256
    assert ck.open_checkpoint(root).sha256 == first
    edit_json(root / "config.json", rms_norm_eps=1e-6)
    second = ck.open_checkpoint(root).sha256
    assert second != first
    tensors = {n: t.astype("float16") for n, t in ck.random_hf_tensors(TINY).items()}
    save_file(tensors, str(root / "model.safetensors"))
    assert ck.open_checkpoint(root).sha256 not in (first, second)


def test_a_resume_from_another_folder_reads_the_planned_checkpoint(tmp_path, monkeypatch):
    from xpubench.workloads import get_workload
    from xpubench.workloads.llama import options

    good(tmp_path / "a" / "ckpt")
    cases = planned(tmp_path / "a", monkeypatch)
    other = LlamaConfig("other", n_layers=2, hidden_size=16, n_heads=2, n_kv_heads=2, head_dim=8,
                        intermediate_size=32, vocab_size=64, max_positions=128)
    ck.write_checkpoint(tmp_path / "b" / "ckpt", other, ck.random_hf_tensors(other))
    monkeypatch.chdir(tmp_path / "b")   # the same "ckpt", typed the same, is another model here
    options._checkpoint.cache_clear()   # as in a worker process of the resumed run
    spec = get_workload("llama").spec_for(cases[0].options)
    assert spec.config.n_layers == 1 and spec.weights == str((tmp_path / "a" / "ckpt").resolve())


def test_a_checkpoint_changed_since_the_plan_is_refused_by_resume_and_by_the_worker(tmp_path, monkeypatch):
    from xpubench.launch import runfile
    from xpubench.workloads import get_workload
    from xpubench.workloads.llama import models, options

    root = good(tmp_path / "ckpt")
    cases = planned(tmp_path, monkeypatch)
    planned_config = (root / "config.json").read_bytes()
    edit_json(root / "config.json", rms_norm_eps=1e-6)
    with pytest.raises(UserError) as err:
        runfile.check_models(tmp_path / "r.jsonl", cases)
    assert "changed since the run was planned" in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith(f"cannot resume {tmp_path / 'r.jsonl'}: --weights {root.resolve()}")
    options._checkpoint.cache_clear()   # as in a worker process, which reads the checkpoint afresh
    spec = get_workload("llama").spec_for(cases[0].options)   # the worker's spec: the planned architecture
    with pytest.raises(UserError, match="changed since the run was planned"):
        models.checkpoint_of(spec)   # its model builder: never measures another checkpoint
    (root / "config.json").write_bytes(planned_config)   # the planned version back
    assert runfile.check_models(tmp_path / "r.jsonl", cases) == []


# ---- item 8: --model pkg.mod:fn runs no code in the parent -------------------------------------------

MODULE = "import torch\n\ndef build():\n    return torch.nn.Linear(4, 2)\n"


def package(root: Path, name: str, init: str) -> str:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(init)
    (root / name / "mod.py").write_text(MODULE)
    return f"{name}.mod:build"


@pytest.mark.parametrize("init, says", [
    ("import sys\nsys.exit(0)\n", "called sys.exit(0) while being imported"),
    ("raise ValueError('boom in __init__')\n", "raised ValueError while being imported: boom in __init__"),
])
def test_a_model_package_runs_in_the_worker_only_and_fails_there_in_one_line(init, says, tmp_path, monkeypatch):
    from xpubench.usermodel.load import import_function
    from xpubench.usermodel.reference import parse_reference

    name = f"xpb_pkg_{abs(hash((str(tmp_path), init))) % 10**8}"
    text = package(tmp_path, name, init)
    monkeypatch.syspath_prepend(str(tmp_path))
    ref = parse_reference(text)   # the parent: finds the file, runs nothing
    assert ref.path == (tmp_path / name / "mod.py").resolve() and ref.module == f"{name}.mod"
    assert name not in sys.modules
    with pytest.raises(UserError) as err:   # the worker: imports the package, one line
        import_function(ref)
    assert str(err.value) == f"model module {name}.mod {says}"


def test_dry_run_of_a_model_package_that_exits_plans_it(tmp_path, monkeypatch, capsys):
    from test_llama_plan import cpu_env

    text = package(tmp_path, "xpb_exiting_pkg", "import sys\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("xpubench.api.detect_environment", lambda **_: cpu_env())
    code = cli.main(["run", "--model", text, "-b", "torch", "--input-shape", "4", "--task", "classes:2", "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0 and "build/torch/cpu/train" in out
    assert "xpb_exiting_pkg" not in sys.modules


# ---- docs/bad-input.md's rows ------------------------------------------------------------------------

def _changed_since_plan(tmp: Path) -> None:
    """A plan whose checkpoint then changed (an empty results file: nothing measured yet)."""
    from test_llama_plan import cpu_env

    from xpubench.launch import runfile
    from xpubench.plan import PlanRequest, build_cases

    root = good(tmp / "changed")
    cases = build_cases(PlanRequest(workloads=["llama"], backends=["torch"], precisions=["fp32"],
                                    options={"weights": str(root)}), cpu_env())
    (tmp / "r.jsonl").write_text("")
    runfile.write_plan(tmp / "r.jsonl", cases, {"processes": 1})
    edit_json(root / "config.json", rms_norm_eps=1e-6)


def _module_exits(tmp: Path) -> None:
    package(tmp, "exitpkg", "import sys\nsys.exit(0)\n")


ROWS = [   # (input, argv with {tmp}, what the line says, setup of {tmp}, runs a worker in {tmp})
    ("--weights: model.safetensors a FIFO", "run --weights {tmp}/fifo", "is a FIFO (named pipe), not a regular file",
     lambda t: _fifo_weights(t / "fifo"), False),
    ("--weights: config.json -> /dev/zero", "run --weights {tmp}/zero", "is a device, not a regular file",
     lambda t: _zero_config(t / "zero"), False),
    ("--weights: 10^6 layers", "run --weights {tmp}/layers", "num_hidden_layers must be a whole number",
     lambda t: _million_layers(t / "layers"), False),
    ("--weights: shard outside the folder", "run --weights {tmp}/outside",
     "a shard must be a file name inside the checkpoint folder", lambda t: _shard_outside(t / "outside"), False),
    ("--weights: tie_word_embeddings \"false\"", "run --weights {tmp}/tied",
     "tie_word_embeddings must be true or false", lambda t: edit_json(good(t / "tied") / "config.json",
                                                                      tie_word_embeddings="false"), False),
    ("--weights: quantization_config a string", "run --weights {tmp}/quant", "quantized checkpoints",
     lambda t: edit_json(good(t / "quant") / "config.json", quantization_config="gptq"), False),
    ("--weights: a RoPE factor NaN", "run --weights {tmp}/nan", "NaN is not a JSON number",
     lambda t: edit_json(good(t / "nan") / "config.json", rope_scaling="RAW:{\"rope_type\": \"llama3\", "
                         "\"factor\": NaN, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0}"), False),
    ("--resume: checkpoint changed since the plan", "run --resume {tmp}/r.jsonl", "changed since the run was planned",
     _changed_since_plan, False),
    ("--model: package __init__ calls sys.exit(0)",
     ("run --model exitpkg.mod:build -b torch --input-shape 4 --task classes:2 --epochs 1 --steps 1 --no-progress "
     "-o {tmp}/m.jsonl"), "model module exitpkg.mod called sys.exit(0) while being imported", _module_exits, True),
]


def run_row(argv: str, tmp: Path, worker: bool) -> tuple[int, list[str]]:
    """A row's command: in this process, or (a --model row: the package on the worker's path) as
    ``xpubench run`` in a process of its own in ``tmp``, planning for the machine detected once per test run
    (test_distributed.xpubench_run: its detection child, ~5 s with torch, is not the row's subject)."""
    from test_distributed import xpubench_run

    args = shlex.split(argv.format(tmp=tmp))
    if worker:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(tmp)]), "OMP_NUM_THREADS": "1"}
        assert args[0] == "run", args
        proc = subprocess.run([*xpubench_run(tmp), *args[1:]], capture_output=True, text=True, cwd=tmp,
                              env=env, timeout=300, check=False)
        return proc.returncode, [line for line in proc.stderr.splitlines() if line.strip()]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(args)
    return code, [line for line in err.getvalue().splitlines() if line.strip()]


@pytest.mark.parametrize("name", [r[0] for r in ROWS if not r[4]])
def test_row(name, tmp_path):
    _, argv, says, setup, worker = next(r for r in ROWS if r[0] == name)
    setup(tmp_path)
    code, lines = run_row(argv, tmp_path, worker)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("xpubench: error: ") and says in lines[0], lines


@pytest.mark.slow
def test_row_of_a_model_package_that_exits_in_the_worker(tmp_path):
    _, argv, says, setup, worker = ROWS[-1]
    setup(tmp_path)
    code, lines = run_row(argv, tmp_path, worker)
    assert code == 2 and lines[-1].startswith("xpubench: error: ") and says in lines[-1], lines
    assert not any("Traceback" in line for line in lines)


def markdown_rows() -> list[str]:
    """These rows of docs/bad-input.md's first table, from the real messages (temporary folder: DIR)."""
    import tempfile

    rows = []
    for name, argv, _, setup, worker in ROWS:
        with tempfile.TemporaryDirectory() as folder:
            tmp = Path(folder)
            setup(tmp)
            code, lines = run_row(argv, tmp, worker)
            line = lines[-1].replace(str(tmp), "DIR").replace("|", "\\|")
            rows.append(f"| {name} | `xpubench {argv.format(tmp='DIR')}` | {line} | {code} |")
    return rows
