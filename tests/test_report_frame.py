"""The notebook API (run, load, report), the flat DataFrame, and the report's generic sections and advice
on records shaped like the harness's (inference, int8, data parallel, a GPU), built here so every
branch is checked with known numbers."""

import re

import numpy as np
import pandas as pd
import pytest
import report_runs as runs

import xpubench
from xpubench.case import Case
from xpubench.report.base.frame import ResultSet
from xpubench.report.render import html
from xpubench.report.render.build import build_report
from xpubench.report.sentences import advice
from xpubench.results.schema import Result

GPU = {"id": "gpu:0", "kind": "gpu", "name": "NVIDIA H100 80GB HBM3", "driver": "550.54",
       "memory_bandwidth": 3.35e12, "peak_flops": {"fp32": 6.7e13, "bf16": 9.89e14}}
CPU = {"id": "cpu", "kind": "cpu", "name": "AMD EPYC", "peak_flops": {"fp32": 1.4e11}}
FINGERPRINT = {"hostname": "test-host", "packages": {"torch": "2.13.0", "jax": "0.10.2"}, "host": {"cpu": {
    "model": "AMD EPYC", "usable_cores": 2}}, "backends": {b: {"installed": True, "devices": [CPU, GPU]}
                                                          for b in ("torch", "jax")}}


def record(workload="mnist_cnn", backend="torch", device="cpu", mode="train", precision="fp32", batch=32,
           devices=1, step=0.1, compile_s=None, metric=0.9, n=12, seed=0, status="ok", **extra) -> Result:
    """A result as the harness writes it: raw step samples around ``step`` (2% noise) and the metrics."""
    rng = np.random.default_rng(seed)
    steps = [float(v) for v in step * (1 + 0.02 * rng.standard_normal(n))]
    case = Case(workload, backend, device, mode, precision, batch_size=batch, devices=devices, eval_samples=10000)
    metrics = {"step_s": step, "first_step_s": step, "compile_s": compile_s, "global_batch": batch * devices,
               "samples_per_s": batch * devices / step, "final_metric": metric, "final_loss": 0.3, "warning": None}
    samples = {"step_s": steps}
    if mode == "infer":
        metrics = {"latency_s": step, "batch": batch, "eval_samples": 10000, "samples_per_s": batch / step,
                   "model_bytes": 4_000_000 if precision == "fp32" else 1_000_000, "metric_name": "accuracy",
                   "accuracy": metric, "warning": None}
        samples = {"latency_s": steps, "pass_s": [10000 / batch * s for s in steps]}
    metrics.update(extra)
    return Result(case=case, status=status, metrics=metrics if status == "ok" else {},
                  samples=samples if status == "ok" else {},
                  series={"train_loss": [1.0, 0.5], "val_metric": [0.5, metric]},
                  fingerprint=FINGERPRINT, placement=device)


def sentences(results) -> str:
    return "\n".join(advice.advice(ResultSet.load(results)))


@pytest.mark.slow
def test_load_gives_one_row_per_case_with_flat_columns():
    frame = xpubench.load([runs.base_file(), runs.slow_file()])
    assert isinstance(frame, pd.DataFrame) and len(frame) == 7
    for col in ("source", "key", "workload", "backend", "device", "device_name", "mode", "precision", "batch_size",
                "size", "devices", "status", "timing", "n_samples", "noisy", "samples_per_s", "warm_flops_per_s",
                "step_ci95_low_s", "compile_s", "final_metric"):
        assert col in frame.columns, col
    assert set(frame["source"]) == {"base", "slow"}
    cells = frame.drop(columns=["noisy"]).to_numpy().ravel()
    assert not any(isinstance(v, (dict, list)) for v in cells)
    train = frame[frame["mode"] == "train"]
    assert sorted(train["batch_size"].tolist()) == [32, 32, 64] and (train["timing"] == "step_s").all()


@pytest.mark.slow
def test_run_returns_results_and_report_writes_a_page(tmp_path, detected_once, monkeypatch):
    out = tmp_path / "tiny.jsonl"
    results = xpubench.run(workloads=["matmul"], backends=["numpy"], sizes=[64], time_budget_s=0.2, output=out,
                           processes=2)
    assert len(results) == 1 and isinstance(results[0], Result) and results[0].status == "ok"
    assert [r.process for r in results[0].runs] == [0, 1] and results[0].metrics["processes"] == 2
    runs.quick_charts(monkeypatch)   # that the page is written with its sections; charts' pixels: test_report_html
    page = xpubench.report([out], tmp_path / "tiny.html")
    assert page.exists() and "Matrix multiply" in page.read_text()
    assert xpubench.load(out).loc[0, "warm_flops_per_s"] > 0


def test_crossover_and_compile_break_even_are_found():
    results = [record(backend="torch", batch=32, step=0.02), record(backend="torch", batch=256, step=0.2, seed=1),
               record(backend="jax", batch=32, step=0.025, compile_s=5.0, seed=2),
               record(backend="jax", batch=256, step=0.15, compile_s=5.0, seed=3)]
    text = sentences(results)
    assert "jax cpu overtakes torch cpu between batch 32 and 256" in text
    steps = int(re.search(r"jax cpu runs 1\.\d+x faster per step than torch cpu .* wins only after ([\d,]+) steps",
                          text).group(1).replace(",", ""))
    assert 99 <= steps <= 101  # 5 s of compile / (0.20 - 0.15) s saved per step
    assert "Only CPUs are in these files" in text


def test_a_difference_within_noise_is_not_ranked():
    text = sentences([record(backend="torch", step=0.100, n=6), record(backend="jax", step=0.101, n=6, seed=9)])
    assert "is within noise of it" in text and "no clear winner" in text


def test_faster_precision_that_lost_accuracy_is_named():
    text = sentences([record(precision="fp32", step=0.1, metric=0.97), record(precision="bf16", step=0.05, metric=0.90),
                      record(precision="fp16", step=0.05, metric=0.968, seed=4)])
    assert re.search(r"bf16 ran at 2\.\d\dx the fp32 speed .*: the faster precision lost 0\.0700 of accuracy", text)
    assert "fp16 ran at" in text and "(no loss beyond sampling noise)" in text


@pytest.mark.slow
def test_inference_scaling_gpu_and_failed_cases_get_their_sections(monkeypatch):
    from report_runs import quick_charts

    quick_charts(monkeypatch)   # sections, tables and chart names asserted, not pixels
    results = [record(mode="infer", precision="fp32", step=0.01, metric=0.97),
               record(mode="infer", precision="int8", step=0.02, metric=0.97, seed=1),
               record(devices=1, step=0.1), record(devices=2, step=0.11, seed=2), record(devices=4, step=0.12, seed=3),
               record(device="gpu:0", step=0.004, seed=5), record(workload="imdb_lstm", status="timeout")]
    report = build_report(results)
    titles = {s.title: s for s in report.sections}
    assert {"Inference and precision", "Data-parallel scaling", "Speedup over the CPU",
            "Cases that did not finish ok"} <= set(titles)
    block = titles["Inference and precision"].tables[0]
    infer = block.frame    # a column with one value in every row is said once above the table (issue 32)
    assert list(infer["dtype"]) == ["fp32", "int8"] and "size vs fp32" not in infer
    assert "size vs fp32 = n/a" in block.lead
    scaling = titles["Data-parallel scaling"].tables[0].frame
    assert list(scaling["devices"]) == ["2", "4"] and scaling["efficiency"].iloc[1] == f"{0.1 / 0.12 / 1:.1%}"
    speed = titles["Speedup over the CPU"].tables[0].frame
    assert speed["speedup warm"].iloc[0].startswith("25.00x") and "H100" in speed["device"].iloc[0]
    assert [c.name for c in titles["Inference and precision"].charts] == ["inference"]
    assert [c.name for c in titles["Data-parallel scaling"].charts] == ["scaling"]
    text = sentences(results)
    assert "Only CPUs" not in text and "int8 ran at 0.5" in text
    page = html.render(report)
    assert "timeout" in page and "NVIDIA H100 80GB HBM3" in page


def test_environment_table_lists_every_file(monkeypatch):
    runs.quick_charts(monkeypatch)   # the environment's text is asserted (~0.8 s of chart drawing in the quick loop)
    frame_text = html.render(build_report([record()]))
    assert "test-host" in frame_text and "torch devices" in frame_text and "driver 550.54" in frame_text
