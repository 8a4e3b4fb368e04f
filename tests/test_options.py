"""plan.options.OPTIONS declares every `xpubench run` option once: each row must reach the place it names
(a PlanRequest field, a key of PlanRequest.options, a run setting) from the command line, from a
--config TOML file and from the notebook API's keywords; --resume refuses exactly the rows that say so."""

import json
from pathlib import Path

import pytest

from xpubench import api
from xpubench.cli import build_parser
from xpubench.cli.run import request_from
from xpubench.errors import UserError
from xpubench.plan import options, options_given
from xpubench.plan.request import is_brief, is_quick, workloads_of
from xpubench.workloads.llama.checkpoint import random_hf_tensors, write_checkpoint
from xpubench.workloads.llama.config import LlamaConfig

TINY_LLAMA = LlamaConfig("tiny", n_layers=1, hidden_size=16, n_heads=2, n_kv_heads=1, head_dim=8, intermediate_size=32,
                         vocab_size=64, max_positions=64)

# option name -> (command-line arguments, TOML keys, the value expected where the row's `goes` points);
# {tmp} is a folder of the test. Every row that is not `cli` must be here: a new row needs a sample.
SAMPLES = {
    "workload": (["-w", "matmul,mnist_cnn"], {"workload": ["matmul", "mnist_cnn"]}, ["matmul", "mnist_cnn"]),
    "backend": (["-b", "numpy"], {"backend": "numpy"}, ["numpy"]),
    "device": (["-d", "cpu"], {"device": ["cpu"]}, ["cpu"]),
    "precision": (["--dtype", "fp32,bf16"], {"precision": ["fp32", "bf16"]}, ["fp32", "bf16"]),
    "batch_size": (["--batch-size", "8,16"], {"batch_size": [8, 16]}, [8, 16]),
    "size": (["--size", "64"], {"size": 64}, [64]),
    "mode": (["--mode", "infer"], {"mode": "infer"}, ["infer"]),
    "concurrency": (["-c", "1,2", "--mode", "serve"], {"concurrency": [1, 2], "mode": "serve"}, [1, 2]),
    "rate": (["--rate", "0.5,2", "--mode", "serve"], {"rate": [0.5, 2.0], "mode": "serve"}, [0.5, 2.0]),
    "devices": (["--devices", "2"], {"devices": 2}, [2]),
    "scaling": (["--scaling"], {"scaling": True}, True),
    "lr_scaling": (["--lr-scaling"], {"lr_scaling": True}, True),
    "epochs": (["--epochs", "2"], {"epochs": 2}, 2),
    "steps": (["--steps", "3"], {"steps": 3}, 3),
    "train_samples": (["--train-samples", "64"], {"train_samples": 64}, 64),
    "eval_samples": (["--eval-samples", "32"], {"eval_samples": 32}, 32),
    "target": (["-w", "mnist_cnn", "--target", "accuracy=0.9", "--data", "real", "--data-dir", "{tmp}"],
               {"workload": "mnist_cnn", "target": "accuracy=0.9", "data": "real", "data_dir": "{tmp}"},
               "accuracy=0.9"),
    "eval_every": (["-w", "mnist_cnn", "--eval-every", "50", "--mode", "time-to-target", "--data", "real",
                    "--data-dir", "{tmp}"],
                   {"workload": "mnist_cnn", "eval_every": 50, "mode": "time-to-target", "data": "real",
                    "data_dir": "{tmp}"}, 50),
    "time_budget": (["--time-budget", "0.5"], {"time_budget": 0.5}, 0.5),
    "budget": (["--budget", "90"], {"budget": 90.0}, 90.0),
    "save_weights": (["--save-weights", "{tmp}"], {"save_weights": "{tmp}"}, "{tmp}"),
    "data": (["--data", "real", "--data-dir", "{tmp}"], {"data": "real", "data_dir": "{tmp}"}, "real"),
    "data_dir": (["--data-dir", "{tmp}"], {"data_dir": "{tmp}"}, "{tmp}"),
    "download": (["--download", "--data", "real", "--data-dir", "{tmp}/new"],
                 {"download": True, "data": "real", "data_dir": "{tmp}/new"}, True),
    "sync": (["--sync", "epoch"], {"sync": "epoch"}, "epoch"),
    "compile": (["--compile", "off"], {"compile": "off"}, "off"),
    "seed": (["--seed", "7"], {"seed": 7}, 7),
    "quick": (["-w", "matmul", "--quick"], {"workload": "matmul", "quick": True}, True),
    "all": (["--all"], {"all": True}, True),
    "model": (["--model", "{tmp}/m.py:build"], {"model": "{tmp}/m.py:build"}, "{tmp}/m.py:build"),
    "input_shape": (["--model", "{tmp}/m.py:build", "--input-shape", "28,28,1"],
                    {"model": "{tmp}/m.py:build", "input_shape": "28,28,1"}, "28,28,1"),
    "input_dtype": (["--model", "{tmp}/m.py:build", "--input-dtype", "int32"],
                    {"model": "{tmp}/m.py:build", "input_dtype": "int32"}, "int32"),
    "task": (["--model", "{tmp}/m.py:build", "--task", "classes:10"],
             {"model": "{tmp}/m.py:build", "task": "classes:10"}, "classes:10"),
    "vocab_size": (["--model", "{tmp}/m.py:build", "--vocab-size", "30522"],
                   {"model": "{tmp}/m.py:build", "vocab_size": 30522}, 30522),
    "preset": (["--preset", "gpt2"], {"preset": "gpt2"}, "gpt2"),
    "weights": (["--weights", "{tmp}/ckpt"], {"weights": "{tmp}/ckpt"}, "{tmp}/ckpt"),
    "attention": (["--attention", "flash"], {"attention": "flash"}, "flash"),
    "prompt_len": (["--prompt-len", "16"], {"prompt_len": 16}, 16),
    "new_tokens": (["--new-tokens", "8"], {"new_tokens": 8}, 8),
    "depth": (["--depth", "0,512"], {"depth": [0, 512]}, [0, 512]),
    "decode": (["--decode", "eager,compiled"], {"decode": ["eager", "compiled"]}, ["eager", "compiled"]),
    "prices": (["--prices", "{tmp}/prices.json"], {"prices": {"cpu": 0.1}}, {"cpu": 0.1}),
    "price_per_hour": (["--price-per-hour", "cpu=0.1", "--price-per-hour", "gpu=2.5"], None,
                       {"cpu": 0.1, "gpu": 2.5}),
    "options": (None, {"options": {"n_layer": 2}}, {"n_layer": 2}),
    "output": (["-o", "r.jsonl"], {"output": "r.jsonl"}, "r.jsonl"),
    "processes": (["--processes", "2"], {"processes": 2}, 2),
    "timeout": (["--timeout", "30"], {"timeout": 30}, 30),
    "memory_limit": (["--memory-limit", "1G"], {"memory_limit": "1G"}, 1 << 30),
    "selftest": (["--selftest", "ok,raise"], {"selftest": ["ok", "raise"]}, ["ok", "raise"]),
}


@pytest.fixture
def tmp(tmp_path):
    (tmp_path / "m.py").write_text("def build():\n    return None\n")
    (tmp_path / "prices.json").write_text(json.dumps({"cpu": 0.1}))
    write_checkpoint(tmp_path / "ckpt", TINY_LLAMA, random_hf_tensors(TINY_LLAMA))   # --weights: checked at plan time
    return tmp_path


def fill(value, tmp: Path):
    """{tmp} in the sample -> the folder (save_weights comes back resolved)."""
    if isinstance(value, str):
        return value.replace("{tmp}", str(tmp))
    if isinstance(value, list):
        return [fill(v, tmp) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, tmp) for k, v in value.items()}
    return value


def reached(o: options.Option, request, run_settings):
    """The value at the place the row names."""
    where, _, name = o.goes.partition(".")
    if where == "request":
        return getattr(request, name)
    if where == "options":
        return request.options.get(name)
    return run_settings.get(name)


def expected(o: options.Option, tmp: Path):
    value = fill(SAMPLES[o.name][2], tmp)
    return str(Path(value).resolve()) if o.name == "save_weights" else value


def toml_text(table: dict) -> str:
    def value(v):
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(v)   # strings, numbers and true/false are written alike
    return "".join(f"{k} = {value(v)}\n" for k, v in table.items())


ROWS = [o for o in options.OPTIONS if o.goes != "cli"]


def test_every_row_has_a_sample():
    assert set(SAMPLES) == {o.name for o in ROWS}


@pytest.mark.parametrize("o", [o for o in ROWS if o.flags], ids=lambda o: o.name)
def test_flag_reaches_its_place(o, tmp):
    args = build_parser().parse_args(["run", *fill(SAMPLES[o.name][0], tmp)])
    request, settings = request_from(args)
    assert reached(o, request, settings) == expected(o, tmp)


@pytest.mark.parametrize("o", [o for o in ROWS if o.in_config], ids=lambda o: o.name)
def test_toml_key_reaches_its_place(o, tmp):
    config = tmp / "run.toml"
    config.write_text("[run]\n" + toml_text(fill(SAMPLES[o.name][1], tmp)))
    request, settings = request_from(build_parser().parse_args(["run", "--config", str(config)]))
    assert reached(o, request, settings) == expected(o, tmp)


# `devices` is also a PlanRequest field (device names), which a keyword of that name sets
@pytest.mark.parametrize("o", [o for o in ROWS if o.in_config and not o.goes.startswith("run.")
                               and o.name != "devices"], ids=lambda o: o.name)
def test_notebook_keyword_reaches_its_place(o, tmp):
    keywords = fill(SAMPLES[o.name][1], tmp)
    if o.name == "download":
        (tmp / "new").mkdir()   # the CLI creates it; the API only checks it
    request = api._request(None, keywords)
    value = reached(o, request, {})
    assert value == (fill(SAMPLES[o.name][2], tmp) if o.name == "save_weights" else expected(o, tmp))


def test_flag_wins_over_the_config_file_and_price_flags_over_the_prices_file(tmp):
    config = tmp / "run.toml"
    config.write_text('workload = "matmul"\nepochs = 5\nprices = {cpu = 0.2, tpu = 4.0}\n')
    args = build_parser().parse_args(["run", "--config", str(config), "--epochs", "2",
                                      "--price-per-hour", "cpu=0.3"])
    request, _ = request_from(args)
    assert request.epochs == 2 and request.workloads == ["matmul"]
    assert request.prices == {"cpu": 0.3, "tpu": 4.0}


def test_default_run_is_quick_and_selftest_picks_its_workload():
    request, _ = request_from(build_parser().parse_args(["run", "--selftest", "ok"]))
    assert is_quick(request) and workloads_of(request) == ["selftest"] and request.options == {"behaviours": ["ok"]}
    assert not is_brief(request)   # a workload chosen: not the brief run
    request, _ = request_from(build_parser().parse_args(["run", "-w", "matmul"]))
    assert not is_quick(request)


def flag_argv(o: options.Option, tmp: Path) -> list[str]:
    if o.name in SAMPLES and SAMPLES[o.name][0]:
        return fill(SAMPLES[o.name][0], tmp)
    return [options.flag(o)] if o.action == "store_true" else [options.flag(o), "x"]


@pytest.mark.parametrize("o", [o for o in options.OPTIONS if o.flags and o.name != "resume"], ids=lambda o: o.name)
def test_resume_refuses_exactly_the_rows_that_say_so(o, tmp):
    args = build_parser().parse_args(["run", "--resume", "r.jsonl", *flag_argv(o, tmp)])
    refused = options_given.refused_with_resume(args)
    assert (options.flag(o) in refused) == (not o.with_resume)


def test_resume_message_names_the_flags_and_what_goes_with_it(capsys):
    from xpubench import cli

    assert cli.main(["run", "--resume", "r.jsonl", "--budget", "60", "-p", "fp32"]) == 2
    err = capsys.readouterr().err
    assert "drop --precision, --budget (only --timeout and --memory-limit go with --resume)" in err


def test_unknown_config_key_lists_the_known_ones(tmp):
    config = tmp / "run.toml"
    config.write_text("batchsize = 64\n")
    with pytest.raises(UserError, match="unknown option\\(s\\) batchsize; known: all, attention, backend, batch_size"):
        request_from(build_parser().parse_args(["run", "--config", str(config)]))


def test_unknown_notebook_keyword_is_refused():
    with pytest.raises(UserError, match="unknown option\\(s\\) batchsize"):
        api._request(None, {"batchsize": 64})


def test_every_flag_of_before_is_still_there():
    before = ["-w", "--workload", "-b", "--backend", "-d", "--device", "-p", "--precision", "--dtype",
              "--batch-size", "--size", "--mode", "--devices", "--scaling", "--lr-scaling", "--coordinator",
              "--num-processes", "--process-id", "--epochs", "--steps", "--train-samples", "--eval-samples",
              "--time-budget", "--save-weights", "--data", "--data-dir", "--download", "--sync", "--compile",
              "--seed", "--quick", "--config", "-o", "--output", "--resume", "--processes", "--timeout",
              "--memory-limit", "--selftest", "--no-progress", "--dry-run", "--env-file"]
    declared = {f for o in options.OPTIONS for f in o.flags}
    assert set(before) <= declared
    assert len([f for o in options.OPTIONS for f in o.flags]) == len(declared)   # each flag once
