"""GPT wired into xpubench: planning (``--mode infer`` is generation, the batch sweep, the default run,
case keys), the trainers' AdamW hook, the generation report, and end to end through ``api.run`` with
tiny sizes (slow: worker processes)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import this_machine
from quick_compile import quick_xla_workers  # noqa: F401  (the fixture, used by name)

from xpubench import api
from xpubench.errors import UserError
from xpubench.plan import PlanRequest, build_cases
from xpubench.report.base.frame import ResultSet
from xpubench.report.charts.generation import throughput_latency_chart
from xpubench.report.render.build import build_report
from xpubench.report.render.terminal import print_run_tables
from xpubench.report.tables.generation import generation_table
from xpubench.results.schema import Result
from xpubench.workloads import gpt

TINY = {"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 32, "prompt_len": 8, "new_tokens": 4}


def env(*backends: str) -> dict:
    cpu = [{"id": "cpu", "kind": "cpu"}]
    return {"backends": {b: {"installed": True, "devices": cpu} for b in backends}, "host": {"cpu": {}}}


# ---- planning ---------------------------------------------------------------------------------------

def test_infer_mode_on_gpt_plans_generation_over_the_batch_sweep() -> None:
    cases = build_cases(PlanRequest(workloads=["gpt"], modes=["infer"]), env("torch", "jax"))
    assert {c.mode for c in cases} == {"generate"}
    for backend in ("torch", "jax"):
        assert sorted(c.batch_size for c in cases if c.backend == backend) == list(gpt.GENERATION_BATCH_SIZES)
    asked = build_cases(PlanRequest(workloads=["gpt"], modes=["infer"], batch_sizes=[2]), env("torch"))
    assert [c.batch_size for c in asked] == [2]
    other = build_cases(PlanRequest(workloads=["mnist_cnn"], modes=["infer"]), env("torch"))
    assert {c.mode for c in other} == {"infer"}                     # only generative workloads change


def test_int8_asks_for_generation_too() -> None:
    cases = build_cases(PlanRequest(workloads=["gpt"], precisions=["fp32", "int8"], batch_sizes=[1]), env("jax"))
    assert {(c.mode, c.precision) for c in cases} == {("generate", "fp32"), ("generate", "int8")}


def test_default_run_has_one_quick_gpt_training_case_per_framework() -> None:
    cases = build_cases(PlanRequest(quick=True), env("numpy", "torch", "jax", "keras"))
    ours = [c for c in cases if c.workload == "gpt"]
    assert sorted(c.backend for c in ours) == ["jax", "torch"]     # keras and numpy have no GPT
    assert all(c.mode == "train" and c.batch_size == gpt.SPEC.quick_batch_size and c.steps for c in ours)


def test_case_key_tells_presets_and_lengths_apart() -> None:
    def key(options):
        return build_cases(PlanRequest(workloads=["gpt"], options=options), env("torch"))[0].key

    assert key({"preset": "gpt2"}) != key({"preset": "small"})
    assert key({"prompt_len": 16}) != key({"prompt_len": 32})
    assert "gpt2" in key({"preset": "gpt2"})


def test_bad_generation_lengths_are_refused_when_planning() -> None:
    with pytest.raises(UserError, match="exceed the context"):
        build_cases(PlanRequest(workloads=["gpt"], options={"prompt_len": 120, "new_tokens": 32}), env("torch"))
    with pytest.raises(UserError, match="at least 2"):
        gpt.configure({"new_tokens": 1})
    assert gpt.generation_lengths(gpt.PRESETS["gpt2"], {}) == (128, 128)


# ---- the optimizer hook -----------------------------------------------------------------------------

def test_torch_trainer_builds_the_workloads_adamw() -> None:
    import torch

    from xpubench.backends.torch_.train import make_optimizer

    spec = gpt.configure(TINY)
    model = gpt.build_torch(spec)
    opt = make_optimizer(spec, model.parameters(), torch.device("cpu"), 1e-3)
    assert isinstance(opt, torch.optim.AdamW)
    assert [g["weight_decay"] for g in opt.param_groups] == [spec.weight_decay, 0.0]
    assert opt.param_groups[0]["betas"] == spec.betas


@pytest.mark.slow   # the update compiled as one program (eagerly, each optax op compiles on its own: 1.6 s)
def test_jax_trainer_builds_the_workloads_adamw() -> None:
    import jax
    import jax.numpy as jnp

    from xpubench.backends.jax_.train import make_optimizer

    spec = gpt.configure(TINY)
    params = {"w": jnp.ones((2, 2)), "b": jnp.ones((2,))}
    tx = make_optimizer(spec, 0.1)
    updates, _ = jax.jit(tx.update)({"w": jnp.zeros((2, 2)), "b": jnp.zeros((2,))}, tx.init(params), params)
    # zero gradients: only decoupled weight decay moves a parameter, and only the matrix
    assert float(jnp.abs(updates["w"]).max()) > 0 and float(jnp.abs(updates["b"]).max()) == 0


def test_run_generation_adds_the_decode_flop_rate() -> None:
    from test_generation_harness import FakeClock, FakeGenerator

    from xpubench.case import Case
    from xpubench.harness.generation import run_generation

    case = Case(workload="gpt", backend="torch", device="cpu", mode="generate", batch_size=4, options=TINY)
    clock = FakeClock()
    outcome = run_generation(case, FakeGenerator(clock, batch=4, prompt_len=8, new_tokens=5), clock)
    m = outcome.metrics
    per_token = gpt.decode_flops_per_token(gpt.configure(TINY), 8 + 5 / 2)
    assert m["flops_per_sample"] == per_token
    assert m["achieved_flops_per_s"] == pytest.approx(per_token * m["decode_tokens_per_s"])
    assert m["decode_tokens_per_s"] == pytest.approx(4 / 0.025)        # fake steps: 10, 20, 30, 40 ms
    assert m["ttft_s"] == m["prefill_s"] == pytest.approx(0.2) and len(outcome.samples["decode_token_s"]) % 4 == 0


# ---- the report -------------------------------------------------------------------------------------

def generated(backend: str, batch: int, p50: float) -> Result:
    case = {"workload": "gpt", "backend": backend, "device": "cpu", "mode": "generate", "precision": "fp32",
            "batch_size": batch, "devices": 1, "options": {}}
    metrics = {"batch": batch, "prompt_len": 64, "new_tokens": 32, "ttft_s": 0.01 * batch, "ttft_p90_s": 0.012 * batch,
               "prefill_tokens_per_s": 64 * batch / (0.01 * batch), "decode_token_p50_s": p50,
               "decode_token_p90_s": 1.5 * p50, "decode_tokens_per_s": batch / p50, "tokens_per_s": batch / p50,
               "mfu": None, "attention_kernel_prefill": "flash", "attention_kernel_decode": "flash", "warning": None}
    return Result(case=case, status="ok", metrics=metrics, samples={"decode_token_s": [p50] * 5})


RESULTS = [generated(b, n, p) for b in ("torch", "jax") for n, p in ((1, 0.002), (4, 0.003), (16, 0.006))]


def test_generation_table_and_chart() -> None:
    frame = ResultSet.load(RESULTS).frame
    table = generation_table(frame).frame()
    assert len(table) == 6 and list(table["batch"][:3]) == ["1", "4", "16"]
    row = table.iloc[2]   # jax, batch 16
    assert row["backend"] == "jax" and row["decode tok/s"] == "2,667" and row["MFU (decode)"] == "n/a"
    assert row["per-token p50 / p90"] == "6 ms / 9 ms" and row["attention"] == "flash"
    chart = throughput_latency_chart(frame)
    assert chart is not None and chart.png.startswith(b"\x89PNG")
    assert any(s.anchor == "generation" for s in build_report(RESULTS).sections)


def test_terminal_prints_the_generation_table() -> None:
    from rich.console import Console

    console = Console(record=True, width=250)
    print_run_tables(RESULTS, console)
    text = console.export_text()
    assert "Generation" in text and "2,667" in text and "TTFT" in text


def test_compare_matches_generation_cases_by_preset() -> None:
    from xpubench.case import Case
    from xpubench.report.base.frame import Entry
    from xpubench.report.compare import compare_loaded
    from xpubench.workloads import with_identity

    def entry(source: str, preset: str, p50: float) -> Entry:
        result = generated("torch", 4, p50)
        result.case = with_identity(Case(workload="gpt", backend="torch", device="cpu", mode="generate", batch_size=4,
                                         options={"preset": preset}))
        return Entry(source, Path(source), result)

    a = [entry("a", "small", 0.002), entry("a", "gpt2", 0.05)]
    b = [entry("b", "small", 0.004)]
    (comparison,) = compare_loaded(a + b)
    (row,) = comparison.rows
    assert "small" in row.key and row.figure == "decode_token_s" and row.ratio == pytest.approx(2.0)


@pytest.mark.slow
def test_jax_data_parallel_gpt_on_a_host_mesh() -> None:
    """gpt training on a JAX mesh of 2 of 8 forced host devices (its own process: XLA_FLAGS is read once)."""
    import os
    import subprocess
    import sys

    code = ("from xpubench.plan import Case; from xpubench.launch.dispatch import run_case; "
            f"o = run_case(Case(workload='gpt', backend='jax', device='cpu', mode='train', batch_size=2, devices=2, "
            f"epochs=2, steps=2, train_samples=16, eval_samples=8, options={TINY!r})); "
            "print(o.status, o.metrics['global_batch'], o.metrics['tokens_per_s'] > 0, o.metrics['attention_kernel'])")
    from quick_compile import QUICK_XLA

    environ = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count=8 {QUICK_XLA}"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=600,
                         check=False)
    assert out.stdout.split()[-4:] == ["ok", "4", "True", "xla"], out.stderr[-2000:]


# ---- end to end -------------------------------------------------------------------------------------

def fixed_bandwidth(backend: str, device: str, *, measurements: int, **_) -> list:
    """ceilings.measure.brief_bandwidths's answer (its measurements), unmeasured."""
    from xpubench.harness.bandwidth import Bandwidth, KernelRate

    copy = KernelRate("copy", "c = a", 2**26, 10.0, 12.0, 0.1)
    return [Bandwidth(backend, device, 2**26, 10.0, {"copy": copy}, elapsed_s=0.2)] * measurements


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread_workers", "quick_xla_workers")
def test_train_and_generate_through_api_run(tmp_path: Path, monkeypatch) -> None:
    # the brief bandwidth the run takes before its generation cases (ceilings/runtime.py brief_bandwidth) is a
    # fixed figure, not a child process importing torch to copy arrays (~4 s of CPU): nothing here reads its value.
    # test_llama_run measures a real one through api.run.
    monkeypatch.setattr("xpubench.ceilings.measure.brief_bandwidths", fixed_bandwidth)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))   # the unmeasured figure is kept there, not here
    request = PlanRequest(workloads=["gpt"], backends=["torch", "jax"], devices=["cpu"], modes=["train", "infer"],
                          precisions=["fp32", "int8"], batch_sizes=[2], epochs=2, steps=2, train_samples=8,
                          eval_samples=4, time_budget_s=1, options=TINY)
    results = {(r.case.backend, r.case.mode, r.case.precision): r
               for r in api.run(request, output=tmp_path / "r.jsonl", processes=1, environment=this_machine())}
    for backend in ("torch", "jax"):
        train = results[backend, "train", "fp32"]
        assert train.status == "ok", train.message
        m = train.metrics
        assert m["tokens_per_s"] == pytest.approx(m["samples_per_s"] * TINY["block_size"])
        assert m["attention_kernel"] in ("flash", "xla") and "mfu" in m
        gen = results[backend, "generate", "fp32"]
        assert gen.status == "ok", gen.message
        g = gen.metrics
        for name in ("ttft_s", "prefill_tokens_per_s", "decode_tokens_per_s", "decode_token_p50_s",
                     "decode_token_p90_s", "achieved_flops_per_s"):
            assert g[name] > 0, name
        assert g["prompt_len"] == 8 and g["new_tokens"] == 4 and "mfu" in g
    assert results["torch", "generate", "int8"].status == "ok"
    skipped = results["jax", "generate", "int8"]
    assert skipped.status == "skipped" and "not applicable" in skipped.message
    lines = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert {line["case"]["mode"] for line in lines} == {"train", "generate"}
    assert dataclasses.is_dataclass(results["torch", "train", "fp32"])
