"""The llama workload in the plan (workloads/llama/workload.py, plan/fit.py): its options and presets, the
weight formats it plans by default, the default run's brief case, the memory arithmetic that skips a
case before it starts (and --dry-run shows), and its estimate. Nothing here runs a model."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from xpubench import cli
from xpubench.case import Case
from xpubench.errors import UserError
from xpubench.launch.runner import run_cases
from xpubench.plan import PlanRequest, build_cases
from xpubench.plan.estimate import case_seconds
from xpubench.plan.fit import HEADROOM, fit_of, refusal
from xpubench.plan.notes import plan_notes
from xpubench.plan.request import workloads_of
from xpubench.workloads import default_run, get_workload
from xpubench.workloads.llama import costs
from xpubench.workloads.llama.spec import configure, generation_lengths

MACHINES = Path(__file__).parent / "data" / "machines"
GIB = 1 << 30
LLAMA = get_workload("llama")


def cpu_env(memory: int = 24 * GIB, flags=("avx2", "avx512f", "avx512_bf16")) -> dict:
    """A CPU-only machine of ``memory`` bytes with torch and jax (bf16 native, fp16 not)."""
    device = {"id": "cpu", "kind": "cpu", "memory_bytes": memory}
    return {"host": {"cpu": {"flags": list(flags), "usable_cores": 2, "peak_estimate": {
        p: {"value": 2e11} for p in ("fp32", "bf16", "fp16", "int8")}}},
        "backends": {b: {"installed": True, "version": "1", "devices": [dict(device)]}
                     for b in ("numpy", "torch", "jax")},
        "variables": {}}


def keys(cases) -> list[str]:
    return [c.key for c in cases]


def test_presets_sizes_and_lengths():
    assert configure({}).config.name == "smollm-135m"
    assert costs.param_count(configure({"preset": "llama-8b"}).config) == 8_030_261_248
    small = configure({"n_layers": 2, "hidden_size": 64, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 256})
    assert (small.config.n_layers, small.config.head_dim, small.config.vocab_size) == (2, 16, 256)
    assert generation_lengths(configure({}), {}) == (512, 128)          # llama-bench's pp512 / tg128
    assert generation_lengths(configure({}), {"prompt_len": 7, "new_tokens": 3}) == (7, 3)
    assert configure({"context": 64}).input_shape == (64,)


@pytest.mark.parametrize("options, says", [
    ({"preset": "small"}, "llama: unknown preset 'small'"),
    ({"n_layers": 0}, "n_layers must be a whole number of at least 1"),
    ({"hidden_size": 100, "n_heads": 3}, "hidden_size (100) must be a multiple of n_heads (3)"),
    ({"new_tokens": 1}, "new_tokens must be a whole number of at least 2"),
    ({"prompt_len": 2000, "new_tokens": 100}, "exceed the model's 2048 positions"),
    ({"weights": "/nowhere", "preset": "llama-1b"}, "takes the architecture from its config.json: drop --preset"),
    ({"weights": "/nowhere"}, "not a directory"),
])
def test_bad_options_are_one_clear_line(options, says):
    with pytest.raises(UserError, match=says.replace("(", r"\(").replace(")", r"\)")):
        configure(options)


def test_a_preset_selects_its_workload_and_a_named_workload_must_take_it():
    assert workloads_of(PlanRequest(options={"preset": "smollm-135m"})) == ["llama"]
    assert workloads_of(PlanRequest(options={"preset": "gpt2"})) == ["gpt"]
    assert workloads_of(PlanRequest(options={"prompt_len": 16})) == default_run()   # shared, selects nothing
    with pytest.raises(UserError, match="gpt: unknown preset 'smollm-135m'"):
        build_cases(PlanRequest(workloads=["gpt"], options={"preset": "smollm-135m"}), cpu_env())
    cases = build_cases(PlanRequest(workloads=["llama"], backends=["torch"], options={"preset": "llama-1b"}), cpu_env())
    assert {c.options["preset"] for c in cases} == {"llama-1b"}


def test_default_formats_leave_out_the_cpus_slow_half_dtype_and_say_so():
    req = PlanRequest(workloads=["llama"], backends=["torch", "jax"])
    cases = build_cases(req, cpu_env())
    torch_ = [c.precision for c in cases if c.backend == "torch"]
    assert torch_ == ["fp32", "bf16", "int8"]                        # no avx512_fp16: torch's fp16 is ~1 GFLOP/s
    assert [c.precision for c in cases if c.backend == "jax"] == ["fp32", "bf16", "fp16", "int8"]
    assert {c.mode for c in cases} == {"generate"} and {c.batch_size for c in cases} == {1}
    assert any("llama torch cpu: fp16 left out" in n for n in plan_notes(req, cpu_env(), cases, environ={}))
    training = build_cases(PlanRequest(workloads=["llama"], backends=["torch"], modes=["train"]), cpu_env())
    assert [(c.mode, c.precision) for c in training] == [("train", "fp32")]   # the formats are generation's
    sweep = build_cases(PlanRequest(workloads=["llama"], backends=["torch"], precisions=["bf16"],
                                    batch_sizes=[1, 2, 4]), cpu_env())
    assert [c.batch_size for c in sweep] == [1, 2, 4]


def test_the_default_run_has_one_brief_case_per_framework():
    cases = [c for c in build_cases(PlanRequest(quick=True), cpu_env()) if c.workload == "llama"]
    assert sorted(c.backend for c in cases) == ["jax", "torch"]
    for c in cases:
        assert (c.mode, c.precision, c.batch_size, c.time_budget_s) == ("generate", "fp32", 1, 2.0)
        assert generation_lengths(configure(c.options), c.options) == (64, 16)
        assert configure(c.options).config.name == "smollm-135m (n_layers 4)"   # stated in the case's key too
        # torch's compiled step, as -w llama's (like with like against JAX's jitted one, issue 52 item 2);
        # --decode is torch's alone: not in jax's key
        assert c.key.endswith("/4/64/16/compiled" if c.backend == "torch" else "/4/64/16")
    chosen = build_cases(PlanRequest(quick=True, workloads=["llama"], backends=["torch"],
                                     options={"preset": "llama-1b"}), cpu_env())
    assert [configure(c.options).config.name for c in chosen] == ["llama-1b"]   # a chosen model is kept whole


def test_llama_8b_fp32_does_not_fit_24_gib_and_is_skipped_with_the_arithmetic():
    env = cpu_env(24 * GIB)
    cases = {c.precision: c for c in build_cases(
        PlanRequest(workloads=["llama"], backends=["torch"], options={"preset": "llama-8b"}), env)}
    why = refusal(cases["fp32"], env)
    assert why.startswith("does not fit the device's memory, not attempted: "
                          "llama-8b fp32 needs 32.4 GB: weights 32.1 GB")
    assert f"cpu has 25.8 GB, {24 * GIB * (1 - HEADROOM) / 1e9:.1f} GB usable" in why
    assert refusal(cases["bf16"], env) is None and fit_of(cases["bf16"], env).fits
    assert case_seconds(cases["fp32"], env) == (0.0, True)            # skipped: no time planned for it
    unknown = copy.deepcopy(env)
    del unknown["backends"]["torch"]["devices"][0]["memory_bytes"]
    assert refusal(cases["fp32"], unknown) is None                    # unknown memory: not checked, not refused
    assert "is unknown here: not checked" in fit_of(cases["fp32"], unknown).sentence()


def test_training_memory_counts_weights_gradients_and_adamw():
    case = Case(workload="llama", backend="torch", device="cpu", mode="train", batch_size=4,
                options={"preset": "llama-8b"})
    fit = fit_of(case, cpu_env())
    assert fit.need.state == 16 * 8_030_261_248 and not fit.fits
    assert "llama-8b training needs at least" in fit.sentence()


def test_a_refused_case_is_recorded_skipped_without_a_worker(tmp_path, monkeypatch):
    from xpubench.launch import runner

    monkeypatch.setattr(runner, "run_one", lambda *a, **k: pytest.fail("a worker was started"))
    case = Case(workload="llama", backend="torch", device="cpu", mode="generate", batch_size=1)
    runs = run_cases([case], tmp_path / "r.jsonl", fingerprint={}, processes=3, refuse=lambda c: "too big")
    assert [(r.status, r.message, r.duration_s) for r in runs] == [("skipped", "too big", 0.0)]


def test_dry_run_on_an_h100_shows_the_memory_arithmetic(capsys):
    code = cli.main(["run", "-w", "llama", "--preset", "llama-8b", "--dry-run", "--env-file",
                     str(MACHINES / "h100-sxm.json"), "-b", "torch", "-d", "gpu"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0
    assert "llama/torch/gpu:0/generate/fp32/b1/llama-8b" in out and "prompt 512 + 128 new" in out
    assert "llama-8b fp32 needs 32.4 GB" in out and "gpu:0 has 85.0 GB, 76.5 GB usable" in out and "fits" in out


def test_dry_run_here_skips_what_does_not_fit(capsys, monkeypatch):
    from xpubench import api

    monkeypatch.setattr(api, "_detect", lambda *_: cpu_env(24 * GIB))
    assert cli.main(["run", "-w", "llama", "--preset", "llama-8b", "-b", "torch", "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "skipped: memory" in out and "llama-8b fp32 needs 32.4 GB" in out and "does not fit" in out


def test_the_estimate_grows_with_the_model_and_the_bandwidth_bounds_decode():
    env = json.loads((MACHINES / "h100-sxm.json").read_text())
    case = Case(workload="llama", backend="torch", device="gpu:0", mode="generate", precision="bf16", batch_size=1,
                options={"preset": "llama-8b"}, key_options=LLAMA.key_options)
    big, known = case_seconds(case, env)
    small, _ = case_seconds(Case(**{**case.__dict__, "options": {}}), env)
    assert known and big > small
    # 127 decode steps reading 16 GB each at 3.35 TB/s: about 0.6 s a round
    assert big > 4 * 127 * costs.decode_bytes_per_step(configure({"preset": "llama-8b"}).config,
                                                       "bf16", 1, 576) / 3.35e12
