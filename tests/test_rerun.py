"""The command that runs a recorded case again (plan/rerun.py, serve/rerun.py; the static site prints it under
each run): parsed by the CLI's own parser and planned, it plans the case's key again, for every case of every
results file the repository holds; a serve case's is an `xpubench serve` command, whose sweep records the key."""

from __future__ import annotations

import dataclasses
import html
import shlex
from pathlib import Path

import pytest

from xpubench import analysis, api, cli
from xpubench.case import Case
from xpubench.cli.run import request_from
from xpubench.cli.serve import request_of
from xpubench.errors import UserError
from xpubench.plan.rerun import rerun_arguments, rerun_command
from xpubench.publish.collect import RunRecord, read_run
from xpubench.publish.pages import run_page
from xpubench.serve.rerun import WEIGHTS

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted([*(ROOT / "tests" / "data").rglob("*.jsonl"), *(ROOT / "results").rglob("*.jsonl")])


def results_of(path: Path):
    """The file's results as a report reads them (keys as this xpubench gives them), or none for a file that is
    no results file (llama-bench's own output, kept to test its parser)."""
    try:
        [loaded] = analysis.load([path])
    except UserError:
        return []
    return loaded.results


def replanned(key: str, recorded: dict, planned: list[Case]) -> bool:
    """Whether a planned case has ``key``; a case recorded before its workload had an option that keys it
    (llama's --decode, in torch's cases) counts when it is that case but for the option."""
    def without(case: Case, names: set[str]) -> str:
        return dataclasses.replace(case, options={k: v for k, v in case.options.items() if k not in names}).key

    return any(c.key == key or without(c, set(c.options) - set(recorded)) == key for c in planned)


def planned(args: list[str], env: dict) -> list[Case]:
    """The cases `xpubench ARGS --dry-run` plans on the machine ``env`` describes (the CLI's parser and planner)."""
    request, _ = request_from(cli.build_parser().parse_args(args))
    return api.plan(request, environment=env).cases


def swept_keys(args: list[str], env: dict, tmp_path: Path) -> set[str]:
    """The keys `xpubench ARGS` records on the machine ``env`` describes: its flags read as the command reads
    them and planned (plan/serve.py), one case per load point."""
    weights = tmp_path / "weights.gguf"   # the user's GGUF the command asks for
    weights.touch()
    parsed = cli.build_parser().parse_args([*(str(weights) if w == WEIGHTS else w for w in args),
                                            "-o", str(tmp_path / "serve.jsonl")])
    return {c.key for c in api.plan(request_of(parsed), environment=env).cases}


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_every_recorded_case_is_planned_again_by_its_command(path, tmp_path, monkeypatch):
    """The site's command (no local path: real data from the default data folder, here an empty one)."""
    (tmp_path / "data").mkdir()
    monkeypatch.setenv("XPUBENCH_DATA_DIR", str(tmp_path / "data"))
    results = results_of(path)
    assert results or path.name == "llama-bench.jsonl"   # llama-bench's own output, kept to test its parser
    for result in results:   # every recorded case, an older file's as this version plans it (a Case: typed on load)
        case = result.case
        args, unsaid = rerun_arguments(case, local_paths=False)
        assert unsaid == {}, result.key
        if case.mode == "serve":
            assert args[0] == "serve" and result.key in swept_keys(args, result.fingerprint, tmp_path), result.key
        else:
            assert args[0] == "run", result.key
            assert replanned(result.key, result.case.options, planned(args, result.fingerprint)), result.key
    # the oldest file's selftest cases, recorded without a batch size, read at the batch the planner gives them
    # (results/schema.py, version 3), so a command plans them again too
    old = [r.key for r in results if r.case.workload == "selftest"]
    assert sorted(old) == ([f"selftest/numpy/cpu/train/fp32/b1/{b}" for b in ("nan", "ok", "oom", "raise")]
                           if path.name == "seed.jsonl" else [])


def test_the_sites_run_page_prints_each_cases_command():
    """With --data and the workload's options (the page's command once dropped them), no local folder."""
    path = ROOT / "tests" / "data" / "records" / "seed.jsonl"
    page = html.unescape(run_page(RunRecord.of("0" * 64, "seed.jsonl", path, read_run(path, "seed.jsonl")), None))
    said = page.split("<h2>Command</h2>")[1].split("</pre>")[0].split("<pre>")[1].splitlines()
    assert ("xpubench run -w mnist_cnn -b torch -d cpu -p fp32 --batch-size 32 --epochs 2 --steps 2 --train-samples "
            "128 --eval-samples 128 --time-budget 1.0 --data real --mode infer") in said
    assert "xpubench run -w gpt -b torch -d cpu -p fp32 --batch-size 2 --epochs 2 --steps 2 --preset small " \
           "--prompt-len 8 --new-tokens 4 --mode infer" in said
    assert "xpubench run -w selftest -b numpy -d cpu -p fp32 --batch-size 1 --selftest ok --mode train" in said
    assert len(said) == 9 and "shared" not in " ".join(said)   # the recorded ../shared/datasets/mnist: local


def test_the_files_hold_serve_cases_too():
    assert any(path.name.startswith("serve_") for path in FILES)


def test_the_command_keeps_what_the_old_one_dropped():
    """--devices, --data and the workload's options (the site's command once left them out); the data folder
    only where local paths may be said; a case's own target as --mode time-to-target."""
    case = Case("mnist_cnn", "torch", "gpu:0", "train", batch_size=64, devices=2, data="real", data_dir="/data/m",
                epochs=4, compile="off", seed=3, options={"target": "default", "sync": "epoch"})
    words = shlex.split(rerun_command(case))
    for flag, value in (("--devices", "2"), ("--data", "real"), ("--data-dir", "/data/m"), ("--epochs", "4"),
                        ("--compile", "off"), ("--seed", "3"), ("--sync", "epoch"), ("--mode", "time-to-target")):
        assert words[words.index(flag) + 1] == value, flag
    assert "--data-dir" not in rerun_command(case, local_paths=False)


def test_an_option_without_a_flag_is_said_as_a_config_key():
    case = Case("llama", "torch", "cpu", "generate", batch_size=1, options={"n_layers": 8, "prompt_len": 64})
    args, unsaid = rerun_arguments(case)
    assert unsaid == {"n_layers": 8} and "--quick" not in args   # the brief run's n_layers is 4
    assert rerun_command(case).endswith("# with a --config file's [run.options]: n_layers = 8")


@pytest.mark.parametrize("label, backend, device, precision, users, rate, more, says", [
    ("served", "llamacpp", "cpu", "q8_0", 2, None, {"requests": 4, "warmup": 1, "weights": "WEIGHTS"},
     "serve --server llamacpp -d cpu --weights WEIGHTS --label served -c 2"),
    ("smollm-135m-q4_0", "llamacpp", "cpu", "q4_0", 1, None, {"preset": "smollm-135m"},
     "--server llamacpp -d cpu --model smollm-135m --format q4_0"),
    ("my-model", "http", "remote", "as-served", 64, 0.5, {"url": "http://10.0.0.5:8000"},
     "serve --url http://10.0.0.5:8000 --label my-model --rate 0.5 --input-len"),
    ("my-model", "llamacpp", "gpu:0", "q8_0", 4, 2.0, {"url": "http://10.0.0.5:8000"},
     "-d gpu:0 --format q8_0 --rate 2 -c 4"),   # its cap: a closed point too
])
def test_a_serve_case_of_a_users_weights_or_a_url_is_swept_again(label, backend, device, precision, users, rate, more,
                                                                  says, tmp_path, monkeypatch):
    """Its command plans its key again: a GGUF served as it is (its own name and format), a named shape, a URL
    whose server does not say what it runs, and one that says it is llama.cpp's, on the device -d names."""
    from xpubench.case import SERVE_KEY_OPTIONS
    from xpubench.results import store
    from xpubench.serve import model, server

    weights = tmp_path / "weights.gguf"
    options = {"input_len": 16, "output_len": 8, "endpoint": "completions", "request_timeout_s": 120.0,
               "point_timeout_s": 600.0, **more}
    options |= {"weights": str(weights)} if "weights" in more else {}
    case = Case(label, backend, device, "serve", precision, users=users, rate=rate, seed=2,
                key_options=SERVE_KEY_OPTIONS, options=options)
    args, _ = rerun_arguments(case)
    assert says in " ".join(args).replace(str(weights), "WEIGHTS") and args[-2:] == ["--seed", "2"]
    said = {"props": {"build_info": "b1-abc", "model_ftype": "Q8_0"}} if backend == "llamacpp" else {}
    monkeypatch.setattr(server, "provenance", lambda url, timeout, headers=None: (said, "my-model"))
    monkeypatch.setattr(model, "given_file", lambda path: model.Served(path, "served", "q8_0", f"the GGUF {path}"))
    weights.touch()
    env = store.load_file(ROOT / "results" / "cpu" / "serve_smollm-135m_q8_0.jsonl").runs[0].fingerprint
    assert case.key in swept_keys(args, env, tmp_path)


@pytest.mark.parametrize("argv", [
    "--model tests/data/usermodels/mixed_models.py:torch_mlp --input-shape 8 --task classes:3 -b torch",
    "-w mnist_cnn -b torch -d gpu:0 --devices 2 --sync epoch --compile off --seed 4 --lr-scaling",
    "-w mnist_cnn -b torch --mode time-to-target --data real --eval-every 50",
    "-w mnist_cnn -b jax --target accuracy=0.9 --data real --epochs 2",
    "-w llama -b torch -d gpu:0 --depth 0,128 --decode eager,compiled -p bf16",
    "-w gpt -b torch -d gpu:0 --preset small --attention math --mode train,infer",
    "--selftest ok,raise",
    "-w matmul -b torch,jax -d gpu:0 --size 512 -p fp16",
])
def test_a_planned_case_is_planned_again_by_its_command(argv, tmp_path, monkeypatch):
    """Cases no recorded file holds, planned here on an H100 node's environment: each one's command plans it."""
    from machine_facts import MACHINES

    from xpubench.backends.envfile import load_environment

    (tmp_path / "data").mkdir()
    monkeypatch.setenv("XPUBENCH_DATA_DIR", str(tmp_path / "data"))
    env = load_environment(str(MACHINES / "h100-sxm.json"))
    cases = planned(["run", *shlex.split(argv)], env)
    assert cases
    for case in cases:
        args, unsaid = rerun_arguments(case)
        assert unsaid == {} and case.key in {c.key for c in planned(args, env)}, (case.key, args)
