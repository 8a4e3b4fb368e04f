"""The llama workload through `xpubench run`, in real worker processes, at tiny shapes (seconds): generation
on a checkpoint the test writes, in both frameworks, int8 weight-only (the figures the worker records are
the ones llama/costs.py computes); training through the training loop in both frameworks; and
``xpubench.bench`` on the checkpoint directory (the eager decode step: the generation test runs the compiled
one). Workers run one thread per kernel library (``one_thread_workers``) and JAX's compile at XLA's backend
optimisation level 0 (``quick_xla_workers``), and the runs plan for the machine detected once per test run
(``machine``: no detection child per run) and share one brief bandwidth measurement (``brief_once``): the
tests check what a run records, not how fast it runs."""

from __future__ import annotations

import pytest
from conftest import this_machine
from quick_compile import quick_xla_workers  # noqa: F401  (the fixture, used by name)

pytest.importorskip("torch")
pytest.importorskip("flax")
pytest.importorskip("safetensors")
pytestmark = pytest.mark.usefixtures("one_thread_workers", "quick_xla_workers")

import xpubench
from xpubench import analysis, cli
from xpubench.ceilings import runtime
from xpubench.workloads.llama import costs
from xpubench.workloads.llama.checkpoint import random_hf_tensors, write_checkpoint
from xpubench.workloads.llama.config import LlamaConfig

TINY = LlamaConfig("tiny", n_layers=2, hidden_size=64, n_heads=4, n_kv_heads=2, head_dim=16, intermediate_size=96,
                   vocab_size=256, max_positions=128, tie_embeddings=False)
SIZES = {"n_layers": 2, "hidden_size": 64, "n_heads": 4, "n_kv_heads": 2, "intermediate_size": 96, "vocab_size": 256}


@pytest.fixture
def checkpoint(tmp_path):
    return write_checkpoint(tmp_path / "tiny-llama", TINY, random_hf_tensors(TINY, seed=1))


BRIEF: dict[str, dict] = {}   # the brief bandwidth the first generation run of this module measured


def brief_once(record: dict, env: dict, cases, on_note=None) -> None:
    """api's brief_bandwidth, its measurement (a child process importing torch, ~5 s of CPU) shared by the
    module's generation runs: a later run's record holds the earlier figure, so the device is known and
    brief_bandwidth measures nothing again (tests/test_brief_run.py: "known now: not measured again")."""
    record["bandwidth"].update(BRIEF)
    before = set(record["bandwidth"])
    runtime.brief_bandwidth(record, env, cases, on_note=on_note)
    BRIEF.update({key: value for key, value in record["bandwidth"].items() if key not in before})


@pytest.fixture(autouse=True)
def machine(monkeypatch, tmp_path_factory) -> dict:
    """The machine detected once per test run (conftest.this_machine), for every run of this module, and its
    brief bandwidth measured once per module (brief_once); and torch.compile's Inductor compiling in the worker
    itself, not in a pool of compile processes that each import torch again (what is recorded, not how fast
    it compiles). The brief bandwidth copies once for 0.2 s, not three times 0.6: the tiny model's decode is far
    from its bound, and nothing here reads more of the figure than that it is a share in (0, 1]."""
    env = this_machine()
    monkeypatch.setattr("xpubench.api.detect_environment", lambda **_: env)
    monkeypatch.setattr("xpubench.api.brief_bandwidth", brief_once)
    monkeypatch.setattr("xpubench.ceilings.runtime.BRIEF_BANDWIDTH_S", 0.2)
    monkeypatch.setattr("xpubench.ceilings.runtime.BRIEF_MEASUREMENTS", 1)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))   # a 0.2 s figure, not kept for real
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "1")
    return env


def results(path) -> dict:
    return {(r.case.backend, r.case.mode): r for r in analysis.load([path])[0].results}


@pytest.mark.slow
def test_generation_on_a_written_checkpoint_in_both_frameworks(checkpoint, tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    assert cli.main(["run", "--weights", str(checkpoint), "-b", "torch,jax", "-p", "int8", "--processes", "1",
                     "--time-budget", "0.3", "-o", str(out)]) == 0        # --weights alone asks for llama
    said = capsys.readouterr().out
    assert "- tiny-llama, pp64/tg32: fastest " in " ".join(said.split())
    prompt_len, new_tokens = 64, 32                                     # a 128-position model: half, a quarter
    for backend in ("torch", "jax"):
        r = results(out)[(backend, "generate")]
        assert r.status == "ok", r.message
        m = r.metrics
        assert (m["architecture"], m["weight_format"], m["compute_precision"]) == ("tiny-llama", "int8", "bf16")
        assert (m["prompt_len"], m["new_tokens"], m["batch"]) == (prompt_len, new_tokens, 1)
        assert m["kv_cache_bytes"] == (prompt_len + new_tokens - 1) * costs.kv_bytes_per_position(TINY, "int8")
        assert m["weight_bytes"] == costs.weight_bytes(TINY, "int8")
        assert m["decode_bytes_per_token"] == costs.decode_bytes_per_token(TINY, "int8", 1, prompt_len + new_tokens / 2)
        assert m["prefill_flops"] == costs.prefill_flops(TINY, prompt_len)
        assert m["prefill_flops_per_s"] == pytest.approx(m["prefill_flops"] / m["ttft_s"])
        assert m["int8_method"].startswith("int8 weights")
        assert m.get("pct_of_bandwidth_bound") is None or 0 < m["pct_of_bandwidth_bound"] <= 1


@pytest.mark.slow
def test_training_through_the_loop_in_both_frameworks(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('[run]\nworkload = "llama"\nmode = "train"\nbackend = ["torch", "jax"]\nepochs = 2\n'
                      'steps = 2\nbatch_size = 2\nprocesses = 1\n[run.options]\ncontext = 32\n'
                      + "".join(f"{k} = {v}\n" for k, v in SIZES.items()))
    out = tmp_path / "t.jsonl"
    assert cli.main(["run", "--config", str(config), "-o", str(out)]) == 0
    cfg = LlamaConfig("tiny", head_dim=16, tie_embeddings=True, **SIZES)   # smollm-135m's, resized
    for backend in ("torch", "jax"):
        r = results(out)[(backend, "train")]
        assert r.status == "ok", r.message
        m = r.metrics
        assert m["tokens_per_s"] == pytest.approx(m["samples_per_s"] * 32)
        assert m["flops_per_sample"] == pytest.approx(3 * costs.prefill_flops(cfg, 32, all_logits=True))
        assert m["step_s"] > 0 and m["step_p90_s"] >= m["step_s"]


@pytest.mark.slow
def test_bench_measures_a_checkpoint_directory(checkpoint, tmp_path):
    """The eager decode step: torch.compile's ~25 CPU-s are the generation test's to pay (it runs the default,
    compiled, through a worker); this test is about ``bench`` taking a checkpoint directory."""
    frame = xpubench.bench(str(checkpoint), backends=["torch"], precisions=["bf16"], processes=1,
                           time_budget_s=0.3, output=tmp_path / "b.jsonl", options={"decode": "eager"})
    assert list(frame["workload"]) == ["llama"] and list(frame["status"]) == ["ok"]
    assert list(frame["architecture"]) == ["tiny-llama"] and list(frame["weight_format"]) == ["bf16"]
    assert results(tmp_path / "b.jsonl")[("torch", "generate")].metrics["decode_step"] == "eager"
