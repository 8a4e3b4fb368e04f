"""Prices from flags and files (one-line errors for bad input), dollars per result, and rankings by
time and by cost."""

import pytest

from xpubench.analysis.cost import rank_time_and_cost, result_cost
from xpubench.errors import UserError
from xpubench.plan.prices import (
    load_prices_file,
    merge_prices,
    normalise_device,
    parse_price_flags,
    price_for,
)


def test_price_flags_and_device_spellings():
    prices = parse_price_flags(["cpu=0.10", "gpu=2.5", "CUDA:1=$1.20", "tpu:3 = 4", "mps=0"])
    assert prices == {"cpu": 0.10, "gpu": 2.5, "gpu:1": 1.20, "tpu:3": 4.0, "mps": 0.0}
    assert normalise_device("rocm:0") == "gpu:0" and normalise_device("cpu:0") == "cpu"


@pytest.mark.parametrize("flag, words", [
    ("cpu", "expected DEVICE=USD"), ("cpu=", "expected DEVICE=USD"), ("=1", "expected DEVICE=USD"),
    ("cpu=abc", "number of US dollars"), ("cpu=-1", "at least 0"), ("cpu=nan", "number"), ("cpu=inf", "number"),
    ("xpu=1", "unknown device 'xpu'"), ("cpu:1=1", "unknown device"), ("gpu:x=1", "unknown device"),
])
def test_bad_price_flags_fail_in_one_line(flag, words):
    with pytest.raises(UserError) as exc:
        parse_price_flags([flag])
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_the_same_device_priced_twice_is_an_error():
    with pytest.raises(UserError, match="gpu:0 is priced twice"):
        parse_price_flags(["gpu:0=1", "cuda:0=2"])


def test_prices_file(tmp_path):
    f = tmp_path / "prices.toml"
    f.write_text('[prices]\ncpu = 0.10\ngpu = 2.50\n"gpu:1" = 1.2\n')
    assert load_prices_file(f) == {"cpu": 0.10, "gpu": 2.5, "gpu:1": 1.2}
    f.write_text('cpu = "0.05"\n')                          # the [prices] header may be left out
    assert load_prices_file(f) == {"cpu": 0.05}
    assert merge_prices({"cpu": 0.05, "gpu": 3.0}, {"cpu": 0.10}) == {"cpu": 0.10, "gpu": 3.0}


@pytest.mark.parametrize("content, words", [
    ("[prices\ncpu = 1", "not valid TOML"), ("[prices]\n", "expected a [prices] table"),
    ("[prices]\ncpu = true", "number of US dollars"), ("[prices]\nquantum = 1", "unknown device"),
    ('[prices]\ngpu = 1\n"cuda" = 2', "priced twice"), ("prices = 3", "expected a [prices] table"),
])
def test_bad_prices_files_fail_in_one_line(tmp_path, content, words):
    f = tmp_path / "prices.toml"
    f.write_text(content)
    with pytest.raises(UserError) as exc:
        load_prices_file(f)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_a_missing_or_binary_prices_file(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_prices_file(tmp_path / "nope.toml")
    f = tmp_path / "bin.toml"
    f.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UserError, match="unreadable"):
        load_prices_file(f)


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
