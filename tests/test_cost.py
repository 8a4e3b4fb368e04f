"""Prices from flags and files, read as `xpubench run` reads them (its parser, then its planner: one-line
errors for bad input), dollars per result, and rankings by time and by cost."""

import pytest
from machine_facts import MACHINES

from xpubench import api, cli
from xpubench.analysis.cost import rank_time_and_cost, result_cost
from xpubench.backends.envfile import load_environment
from xpubench.cli.run import request_from
from xpubench.plan.prices import normalise_device, price_for

RUN = ["run", "-w", "matmul", "--size", "64", "-b", "torch", "-p", "fp32", "-d", "cpu,gpu:0,gpu:1",
       "--env-file", str(MACHINES / "h100-sxm.json")]   # an H100 node: a case on the CPU and on two GPUs


def planned_prices(*flags: str) -> dict[str, float | None]:
    """{device: USD per hour} of the cases `xpubench run RUN FLAGS --dry-run` plans, parsed by the CLI's parser
    and planned by its planner."""
    args = cli.build_parser().parse_args([*RUN, *flags])
    request, _ = request_from(args)
    cases = api.plan(request, environment=load_environment(args.env_file)).cases
    return {case.device: case.options.get("price_per_hour") for case in cases}


def refusal(capsys, *flags: str) -> str:
    """The one line `xpubench run RUN FLAGS --dry-run` exits 2 with."""
    assert cli.main([*RUN, "--dry-run", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


def test_price_flags_and_device_spellings():
    assert planned_prices("--price-per-hour", "cpu=0.10", "--price-per-hour", "gpu=2.5",
                          "--price-per-hour", "CUDA:1=1.20") == {"cpu": 0.10, "gpu:0": 2.5, "gpu:1": 1.20}
    assert planned_prices("--price-per-hour", "rocm:0=3") == {"cpu": None, "gpu:0": 3.0, "gpu:1": None}
    assert normalise_device("rocm:0") == "gpu:0" and normalise_device("cpu:0") == "cpu"


@pytest.mark.parametrize("flag, words", [
    ("cpu", "give DEVICE=USD_PER_HOUR"), ("=1", "give DEVICE=USD_PER_HOUR"), ("cpu=", "not a price"),
    ("cpu=abc", "not a price"), ("gpu=$1.20", "gpu: not a price in US dollars per hour: '$1.20'"),
    ("cpu=-1", "0 or more"), ("cpu=nan", "0 or more"), ("cpu=inf", "0 or more"),
    ("xpu=1", "unknown device 'xpu'"), ("cpu:1=1", "unknown device 'cpu:1'"), ("gpu:x=1", "unknown device 'gpu:x'"),
])
def test_bad_price_flags_fail_in_one_line(capsys, flag, words):
    assert words in refusal(capsys, "--price-per-hour", flag)


def test_one_device_priced_under_two_spellings_is_an_error(capsys):
    err = refusal(capsys, "--price-per-hour", "gpu:0=1", "--price-per-hour", "cuda:0=2")
    assert "gpu:0 is priced twice (gpu:0 and cuda:0)" in err


def test_prices_file(tmp_path):
    f = tmp_path / "prices.toml"
    f.write_text('[prices]\ncpu = 0.10\ngpu = 2.50\n"gpu:1" = 1.2\n')
    assert planned_prices("--prices", str(f)) == {"cpu": 0.10, "gpu:0": 2.5, "gpu:1": 1.2}
    assert planned_prices("--prices", str(f), "--price-per-hour", "cpu=0.2") == {   # a flag over the file
        "cpu": 0.2, "gpu:0": 2.5, "gpu:1": 1.2}
    f.write_text("cpu = 0.05\n")                          # the [prices] header may be left out
    assert planned_prices("--prices", str(f))["cpu"] == 0.05
    (tmp_path / "prices.json").write_text('{"gpu": 2}')
    assert planned_prices("--prices", str(tmp_path / "prices.json"))["gpu:1"] == 2.0


@pytest.mark.parametrize("content, words", [
    ("[prices\ncpu = 1", "not valid TOML"), ("[prices]\ncpu = true", "0 or more, got True"),
    ('[prices]\ncpu = "$0.10"', "0 or more, got '$0.10'"), ("[prices]\nquantum = 1", "unknown device 'quantum'"),
    ('[prices]\ngpu = 1\n"cuda" = 2', "gpu is priced twice (gpu and cuda)"),
])
def test_bad_prices_files_fail_in_one_line(capsys, tmp_path, content, words):
    f = tmp_path / "prices.toml"
    f.write_text(content)
    assert words in refusal(capsys, "--prices", str(f))


def test_a_missing_or_binary_prices_file(capsys, tmp_path):
    assert "does not exist" in refusal(capsys, "--prices", str(tmp_path / "nope.toml"))
    f = tmp_path / "bin.toml"
    f.write_bytes(b"\xff\xfe\x00")
    assert "is not a text (UTF-8) file" in refusal(capsys, "--prices", str(f))


def test_price_of_a_device_and_of_several():
    prices = {"cpu": 0.1, "gpu": 2.0, "gpu:1": 1.0}
    assert price_for(prices, "gpu:0") == 2.0 and price_for(prices, "gpu:1") == 1.0
    assert price_for(prices, "cuda:2") == 2.0
    assert price_for(prices, "gpu:0", devices=2) == 3.0            # gpu:0 + gpu:1
    assert price_for(prices, "cpu", devices=8) == 0.1              # JAX's host "devices" share one CPU
    assert price_for(prices, "tpu:0") is None and price_for({"gpu:0": 1.0}, "gpu:0", devices=2) is None


def test_dollars_per_result_are_what_each_mode_record_prices():
    f = result_cost({"samples_per_s": 1000.0, "epoch_s": 60.0}, "train", 0.10)   # Mode.priced, results/modes.py
    assert f["usd_per_1m_samples"] == pytest.approx(0.10 / 3600 * 1e6 / 1000)     # $0.0278
    assert f["usd_per_epoch"] == pytest.approx(0.10 / 3600 * 60)
    assert result_cost({"samples_per_s": 5000.0}, "infer", 0.10)["usd_per_1m_predictions"] == pytest.approx(
        0.10 / 3600 * 1e6 / 5000)
    assert result_cost({"samples_per_s": 0.0}, "train", 1.0) == {"usd_per_hour": 1.0}   # no rate: no figure
    tokens = result_cost({"decode_tokens_per_s": 40.0, "prefill_tokens_per_s": 400.0}, "generate", 1.0)
    assert tokens["usd_per_1m_tokens"] == pytest.approx(1.0 / 3600 * 1e6 / 40)           # $6.94 per 1M generated
    assert tokens["usd_per_1m_prompt_tokens"] == pytest.approx(1.0 / 3600 * 1e6 / 400)   # and per 1M prompt tokens
    assert result_cost({"warm_flops_per_s": 1e12}, "matmul", 3.6)["usd_per_pflop"] == pytest.approx(1.0)   # 1000 s
    assert result_cost({"time_to_target_s": 90.0}, "train", 2.0)["usd_to_target"] == pytest.approx(0.05)
    assert result_cost({"output_tokens_per_s": 40.0}, "serve", 1.0) == {"usd_per_hour": 1.0}   # priced: ()
    assert result_cost({"samples_per_s": 1000.0}, "train", None)["cost_na"].startswith("n/a: no price")


def test_rankings_by_time_and_cost_and_where_they_differ():
    # seconds per 1M samples and $ per 1M samples: the GPU is 10x faster but 25x the price
    options = {"torch gpu:0": (100.0, 0.0694), "torch cpu": (1000.0, 0.0278), "jax cpu": (1500.0, 0.0417),
               "jax tpu:0": (80.0, None)}
    r = rank_time_and_cost(options)
    assert r.by_time == ["jax tpu:0", "torch gpu:0", "torch cpu", "jax cpu"]
    assert r.by_cost == ["torch cpu", "jax cpu", "torch gpu:0"] and r.unpriced == ["jax tpu:0"]
    assert not r.same_order and len(r.differences) == 2
    assert r.differences[0].startswith("torch gpu:0 is faster than torch cpu (10.00x) but torch cpu is cheaper")
    same = rank_time_and_cost({"a": (1.0, 1.0), "b": (2.0, 2.0)})
    assert same.same_order and same.by_time == same.by_cost == ["a", "b"]
