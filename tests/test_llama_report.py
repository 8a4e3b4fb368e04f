"""A language model's generation after loading (analysis/generation.py) and in the reports (report/tables/llm.py):
pp MFU, the decode rate's share of its bandwidth bound (measured bandwidth first, the spec's second,
never above 100%), the pp/tg table per weight format, the tokens/s-against-batch chart, the answer's line
and the ceilings a generation run asks for. Results are built by hand; nothing runs a model."""

from __future__ import annotations

import dataclasses

import pytest

from xpubench.analysis import analyse
from xpubench.analysis.generation import add_generation_bounds
from xpubench.case import Case
from xpubench.ceilings.runtime import wanted
from xpubench.report.base.frame import ResultSet
from xpubench.report.charts.generation import tokens_batch_chart
from xpubench.report.sections import section
from xpubench.report.sentences.answer import answer_lines
from xpubench.report.sentences.language_models import model_lines
from xpubench.report.tables import llm
from xpubench.results.schema import Result

BYTES = 270e6        # bytes read per generated token (smollm-135m bf16 at batch 1, about)
CASE = {"workload": "llama", "backend": "torch", "device": "cpu", "mode": "generate", "precision": "bf16",
        "batch_size": 1, "devices": 1, "key": "llama/torch/cpu/generate/bf16/b1", "run_id": "a"}


def fingerprint(measured: float | None = None, spec: float | None = None) -> dict:
    fp = {"backends": {"torch": {"devices": [{"id": "cpu", "kind": "cpu", "memory_bandwidth": spec}]}},
          "host": {"cpu": {"peak_estimate": {"bf16": {"value": 4e11}}}}}
    if measured:
        fp["ceilings"] = {"ceilings": {}, "bandwidth": {"torch/cpu": {"bytes_per_s": measured, "written": "today"}}}
    return fp


def metrics(tg: float = 40.0, **extra) -> dict:
    base = {"decode_tokens_per_s": tg, "decode_bytes_per_token": BYTES, "prefill_flops": 1.4e11, "ttft_s": 0.5,
            "prefill_tokens_per_s": 1024.0, "prompt_len": 512, "new_tokens": 128, "decode_token_p50_s": 1 / tg,
            "decode_token_p90_s": 1.1 / tg, "decode_token_s": 1 / tg, "kv_cache_bytes": 2 ** 20,
            "weight_bytes": 2.7e8, "weight_format": "bf16", "architecture": "smollm-135m", "compute_precision": "bf16"}
    return {**base, **extra}


def test_the_share_uses_the_measured_bandwidth_before_the_spec():
    m = metrics(peak_flops_per_s=4e11)
    add_generation_bounds(m, Case.from_dict(CASE), fingerprint(measured=18e9, spec=50e9))
    assert m["bandwidth_bound_tokens_per_s"] == pytest.approx(18e9 / BYTES)
    assert m["pct_of_bandwidth_bound"] == pytest.approx(40 / (18e9 / BYTES))
    assert m["bound_bandwidth_source"].startswith("measured (torch's copy/triad")
    faster = fingerprint(measured=18e9)
    faster["ceilings"]["bandwidth"]["jax/cpu"] = {"bytes_per_s": 24e9}       # the device's: the fastest backend's
    faster["ceilings"]["bandwidth"]["jax/gpu:0"] = {"bytes_per_s": 3e12}     # another device: not this one's
    m2 = metrics()
    add_generation_bounds(m2, Case.from_dict(CASE), faster)
    assert m2["bound_bandwidth"] == 24e9 and m2["bound_bandwidth_source"].startswith("measured (jax's")
    assert m["prefill_flops_per_s"] == pytest.approx(2.8e11) and m["prefill_mfu"] == pytest.approx(0.7)
    spec = metrics()
    add_generation_bounds(spec, Case.from_dict(CASE), fingerprint(spec=50e9))
    assert spec["bound_bandwidth"] == 50e9 and "spec" in spec["bound_bandwidth_source"]
    assert spec["prefill_mfu"] is None             # no peak known: n/a, never a guess


def test_no_bandwidth_known_is_na_with_the_reason():
    m = metrics()
    add_generation_bounds(m, Case.from_dict(CASE), fingerprint())
    assert "pct_of_bandwidth_bound" not in m and "xpubench ceilings" in m["bandwidth_bound_note"]


def test_a_share_above_100_percent_is_an_unreliable_bound_never_stored():
    m = metrics(tg=200.0)                           # 200 tok/s x 270 MB = 54 GB/s against 18 GB/s
    add_generation_bounds(m, Case.from_dict(CASE), fingerprint(measured=18e9))
    assert "pct_of_bandwidth_bound" not in m
    assert m["bandwidth_bound_note"].startswith("unreliable bound, not printed: decode ran at 200.0 tokens/s")
    assert "it moved at least 54.0 GB/s" in m["bandwidth_bound_note"]
    assert llm.bound_cell(m) == "n/a (>100%: bound unreliable)"
    assert model_lines(loaded(result(tg=200.0))) == [(
        "smollm-135m, pp512/tg128: torch cpu bf16 decode 200 tok/s, n/a (>100%: bound unreliable) of the bandwidth "
        "bound (the only runtime measured)")]


def result(precision: str = "bf16", batch: int = 1, tg: float = 40.0, backend: str = "torch",
           metrics_extra: dict | None = None) -> Result:
    extra = metrics_extra or {}
    case = {**CASE, "precision": precision, "batch_size": batch, "backend": backend,
            "key": f"llama/{backend}/cpu/generate/{precision}/b{batch}/{extra.get('depth', '')}",
            "run_id": f"{backend}{precision}{batch}{extra.get('depth', '')}"}
    return Result(case=case, status="ok", metrics=metrics(tg, weight_format=precision, **extra),
                  samples={"decode_token_s": [1 / tg] * 6, "prefill_s": [0.5, 0.5]},
                  fingerprint=fingerprint(measured=18e9))


def loaded(*results: Result) -> ResultSet:
    return ResultSet.load([dataclasses.replace(r) for r in analyse(list(results))])


def test_one_table_of_every_runtime_and_format_and_one_answer_line_for_them_all():
    """Issue 50 item 7: one llama-bench table, a row per runtime x format x test (the formats in order, the
    fastest tg first); the answer says one line for the model and test: the fastest runtime and format, the
    verdict against the next, then the others, each with its share of the bandwidth bound."""
    data = loaded(result("fp32", tg=20.0), result("bf16", tg=30.0, backend="jax"), result("bf16", tg=40.0))
    [table] = section("llm").shown_tables(data, report=True)
    cells = table.frame()
    assert list(zip(cells["format"], cells["backend"], cells["test"])) == [
        ("fp32", "torch", "pp512"), ("fp32", "torch", "tg128"), ("bf16", "torch", "pp512"), ("bf16", "torch", "tg128"),
        ("bf16", "jax", "pp512"), ("bf16", "jax", "tg128")]                  # llama-bench's rows
    assert list(cells["t/s"])[1::2] == ["20.0", "40.0", "30.0"]
    assert list(cells["of bw bound"])[1::2] == [f"{tg / (18e9 / BYTES):.0%}" for tg in (20.0, 40.0, 30.0)]
    share = [f"{tg / (18e9 / BYTES):.0%}" for tg in (40.0, 30.0, 20.0)]
    assert [line for line in answer_lines(data) if "smollm" in line] == [(
        f"- smollm-135m, pp512/tg128: fastest torch cpu bf16, 1.33x as fast as jax cpu bf16 (decode 40.0 tok/s against "
        f"30.0 tok/s, {share[0]} against {share[1]} of the bandwidth bound; 95% interval 1.33-1.33) (provisional: one "
        f"process a side); then torch cpu 20.0 tok/s ({share[2]})")]


def test_the_table_reads_like_llama_bench():
    """model, size, params, backend with the decode step it ran where it is not the default (issue 52 item 2),
    threads, test (with the depth), t/s ± sd; the energy's n/a carries its reason."""
    extra = {"params": 134_515_008, "model_bytes": 269_030_016, "threads": 2, "decode_tokens_per_s_sd": 0.5,
             "prefill_tokens_per_s_sd": 12.0, "energy_na": "n/a: no CPU energy counter: no RAPL package zone"}
    data = loaded(result("bf16", tg=40.0, metrics_extra={**extra, "decode_step": "compiled (torch.compile)"}),
                  result("bf16", tg=35.0, metrics_extra={**extra, "decode_step": "eager", "depth": 4096}))
    cells = section("llm").shown_tables(data, report=True)[0].frame()
    assert list(cells["test"]) == ["pp512", "tg128", "pp512 @ d4096", "tg128 @ d4096"]
    assert list(cells["backend"]) == ["torch"] * 2 + ["torch (eager decode)"] * 2
    assert cells["t/s"].iloc[1] == "40.0 ± 0.500" and cells["t/s"].iloc[0] == "1,024 ± 12.0"
    assert cells["params"].iloc[0] == "134.52 M" and cells["size"].iloc[0] == "256.6 MiB"
    assert cells["threads"].iloc[0] == "2"
    assert cells["J/token"].iloc[0] == "n/a (no CPU energy counter)"


def test_files_without_a_language_model_have_no_such_line_nor_table():
    gpt = result()
    gpt.metrics.pop("decode_bytes_per_token")
    for data in (loaded(gpt), loaded(dataclasses.replace(gpt, status="skipped"))):
        assert model_lines(data) == [] and llm.format_tables(data.frame) == []
        assert tokens_batch_chart(data.frame) is None


def test_the_batch_chart_needs_a_sweep():
    assert tokens_batch_chart(loaded(result(batch=1)).frame) is None
    chart = tokens_batch_chart(loaded(result(batch=1), result(batch=2, tg=70.0), result(batch=4, tg=120.0)).frame)
    assert chart is not None and chart.png.startswith(b"\x89PNG")


def test_a_generation_run_asks_for_the_bandwidth_even_for_int8():
    case = Case(workload="llama", backend="torch", device="cpu", mode="generate", precision="int8", batch_size=1)
    assert wanted([case]) == {("torch", "cpu"): []}
    assert wanted([dataclasses.replace(case, precision="bf16")]) == {("torch", "cpu"): ["bf16"]}


def test_an_engines_own_figures_of_the_same_calls_stand_beside_xpubenchs():
    """Issue 50 item 2: OpenVINO GenAI's perf metrics (its TTFT and TPOT of the calls xpubench timed) are shown
    beside xpubench's pp and tg, so a reader sees they agree; a runtime reporting none leaves its cells empty,
    and a table of such runtimes has no such column."""
    own = {"engine_ttft_s": 0.25, "engine_decode_tokens_per_s": 39.5}
    data = loaded(result(tg=40.0, backend="openvino", metrics_extra=own), result(tg=30.0, backend="jax"))
    [table] = section("llm").shown_tables(data, report=True)
    cells = table.frame()
    column = dict(zip(zip(cells["backend"], cells["test"]), cells["engine's own t/s"]))
    assert column[("openvino", "tg128")] == "39.5" and column[("openvino", "pp512")] == f"{512 / 0.25:,.0f}"
    assert column[("jax", "tg128")] == column[("jax", "pp512")] == ""
    [plain] = section("llm").shown_tables(loaded(result(tg=30.0, backend="jax")), report=True)
    assert "engine's own t/s" not in plain.frame()
