"""The engines (backends/engine.py; docs/engines.md): OpenVINO GenAI and MLX-LM for real on a tiny checkpoint,
each checked against transformers' greedy tokens of the same weights; what an engine can't load refused before
anything runs (docs/bad-input.md's "engines" rows); ``xpubench run`` of both through their workers."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from bad_input_doc import Case, check_row, run_case

from xpubench import backends
from xpubench.backends.base import Unsupported
from xpubench.workloads import get_workload
from xpubench.workloads.llama import checkpoint as ck
from xpubench.workloads.llama.config import LlamaConfig

TINY = LlamaConfig("tiny", n_layers=2, hidden_size=64, n_heads=4, n_kv_heads=2, head_dim=16, intermediate_size=128,
                   vocab_size=256, rope_theta=10_000.0, tie_embeddings=True, max_positions=256)
ODD = LlamaConfig("odd", n_layers=1, hidden_size=48, n_heads=3, n_kv_heads=1, head_dim=16, intermediate_size=96,
                  vocab_size=128, rope_theta=10_000.0, tie_embeddings=True, max_positions=64)   # rows of 48: no int4
PROMPT, NEW = 12, 6


def weights_of(folder: Path):
    llama = get_workload("llama")
    options = llama.options_of(llama.pin_options({"weights": str(folder), "prompt_len": PROMPT, "new_tokens": NEW}))
    return llama.checkpoint(llama.spec_for(options), 0)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny checkpoint, its Weights, and a cache of this module's own (XDG_CACHE_HOME) for what engines convert."""
    root = tmp_path_factory.mktemp("engines")
    folder = ck.write_checkpoint(root / "ckpt", TINY, ck.random_hf_tensors(TINY, seed=3, std=0.3))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(root / "cache"))
        yield folder, weights_of(folder), root


def reference_tokens(folder: Path, ids: np.ndarray) -> list[int]:
    """transformers' greedy continuation of ``ids`` (fp32): what every engine's fp32 must produce."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    out = model.generate(torch.from_numpy(ids), max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False,
                         eos_token_id=0, pad_token_id=0)   # eos 0 held back until NEW tokens, as the engines ask
    return out[0, ids.shape[1]:].tolist()


def prompt_ids() -> np.ndarray:
    return np.random.default_rng(0).integers(0, TINY.vocab_size, (1, PROMPT), dtype=np.int64)


# ---- what an engine can't load: one line, exit 2; in a sweep, that case's skip ----------------------------

def doc_cases(folder: Path) -> list[Case]:
    """docs/bad-input.md's engine rows."""
    ck.write_checkpoint(folder / "odd", ODD, ck.random_hf_tensors(ODD))
    return [
        Case("a format an engine lacks", "xpubench run -w llama -b openvino -p fp16",
             "openvino has no fp16 format (OpenVINO GenAI's: fp32 (FP32), bf16 (BF16), int8 (INT8_ASYM), int4"),
        Case("a checkpoint an engine can't convert to the format", f"xpubench run -w llama --weights {folder}/odd "
             "-b openvino -p int4", "OpenVINO's INT4_ASYM groups of 32 weights must tile each row (lengths 48, 96)"),
        Case("a format one engine of a sweep lacks", "xpubench run -w llama -b openvino,mlx -p fp16 --dry-run",
             "#1 skipped: openvino has no fp16 format", code=0),
    ]


@pytest.mark.parametrize("index", range(3))
def test_what_an_engine_cannot_load_is_refused_before_anything_runs(index, tmp_path, monkeypatch, detected_once):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    case = doc_cases(tmp_path)[index]
    check_row(case, run_case(case))
    assert not (tmp_path / "cache" / "xpubench" / "openvino").exists()       # nothing converted, nothing written


def test_an_engine_is_planned_only_in_the_formats_it_has(tmp_path, monkeypatch):
    from xpubench.plan import PlanRequest, build_cases
    from xpubench.plan.fit import refusal

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    env = {"backends": {b: {"installed": True, "devices": [{"id": "cpu", "kind": "cpu"}]}
                        for b in ("openvino", "mlx")}, "devices": [{"id": "cpu", "kind": "cpu"}]}
    cases = build_cases(PlanRequest(workloads=["llama"], backends=["openvino", "mlx"], modes=["infer"]), env)
    formats = {b: {c.precision for c in cases if c.backend == b} for b in ("openvino", "mlx")}
    assert all(formats.values()) and formats["openvino"] <= set(backends.get("openvino").formats)
    asked = build_cases(PlanRequest(workloads=["llama"], backends=["openvino", "mlx"], precisions=["fp16"]), env)
    skipped = {c.backend: refusal(c, env) for c in asked}
    assert skipped["openvino"].startswith("openvino has no fp16 format") and skipped["mlx"] is None


# ---- OpenVINO GenAI, real ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_openvino_converts_the_checkpoint_offline_caches_it_and_times_its_own_calls(tiny, monkeypatch):
    """fp32 converted by OpenVINO's converter generates transformers' greedy tokens; int8 is NNCF's compression of
    the cached fp32 model (no second trace) and is itself cached; bench records the pipeline's own perf metrics
    beside xpubench's clock of the same calls."""
    pytest.importorskip("openvino_genai")
    from xpubench.backends.openvino_ import convert

    folder, weights, _ = tiny
    engine = backends.get("openvino")
    fp32 = engine.load(weights, "fp32")
    assert "INFERENCE_PRECISION_HINT f32" in fp32.facts["engine_settings"]   # what was asked, read back
    config = fp32.pipe.get_generation_config()
    config.max_new_tokens = config.min_new_tokens = NEW
    config.ignore_eos, config.do_sample = True, False
    config.eos_token_id, config.stop_token_ids = 0, {0}   # as bench asks: token 0 held back until NEW tokens
    import openvino as ov

    tokens = list(fp32.pipe.generate(ov.Tensor(prompt_ids()), config).tokens[0])
    assert tokens == reference_tokens(folder, prompt_ids())

    def no_trace(*args):
        raise AssertionError("int8 must be compressed from the cached fp32 model, not traced again")

    monkeypatch.setattr(convert, "convert", no_trace)
    int8 = engine.load(weights, "int8")
    assert int8.facts["weight_format"] == "int8_asym" and int8.facts["model_bytes"] < fp32.facts["model_bytes"] / 2.5
    assert "cached" in engine.load(weights, "fp32").facts["engine_settings"].rsplit(",", 1)[1]

    metrics, samples = engine.bench(int8, prompt_len=PROMPT, new_tokens=NEW, depth=0, batch=1, budget_s=0.05)
    assert len(samples["decode_token_s"]) == len(samples["prefill_s"]) * (NEW - 1) > 0
    assert metrics["engine_decode_tokens_per_s"] == pytest.approx(1 / metrics["engine_decode_token_s"])
    assert all(metrics[k] > 0 for k in ("engine_ttft_s", "engine_tokens_per_s", "decode_tokens_per_s", "ttft_s"))
    with pytest.raises(Unsupported, match="empty KV cache"):
        engine.bench(int8, prompt_len=PROMPT, new_tokens=NEW, depth=8, batch=1, budget_s=0.05)


# ---- MLX-LM, real (mlx[cpu]) --------------------------------------------------------------------------------

def test_openvino_gets_a_new_prompt_every_round():
    """The pipeline keeps the last call's KV cache and reuses a repeated prompt's prefix: the same 512 ids again
    had a 2.7 ms prefill against 39 ms (pp512 read 210,000 tok/s on 2 cores). Every round, warm-up included,
    sends ids it has not sent before. The pipeline is a stand-in that records what it is given."""
    pytest.importorskip("openvino_genai")
    from xpubench.backends.openvino_ import pipeline
    from xpubench.harness.generation import WARMUP_ROUNDS

    sent = []

    class Metric:
        mean = 2.0

    class Result:
        class perf_metrics:   # GenAI's attribute
            get_ttft = get_tpot = get_throughput = staticmethod(lambda: Metric)

    class Pipe:
        def get_generation_config(self):
            return type("Config", (), {})()

        def generate(self, ids, config, streamer):
            sent.append(np.array(ids.data, copy=True))
            for _ in range(config.max_new_tokens):
                streamer.write(1)
            return Result

    ticks = iter(range(10_000))
    model = pipeline.OpenVinoModel(Pipe(), vocab_size=1000, threads=1)
    _, raw = pipeline.bench(model, 64, 4, budget_s=None, clock=lambda: float(next(ticks)))
    assert len(sent) == len(raw["prefill_s"]) + 1 + WARMUP_ROUNDS and all(a.shape == (1, 64) for a in sent)
    assert len({a.tobytes() for a in sent}) == len(sent)


def test_mlx_loads_the_folder_as_it_is_and_generates_transformers_greedy_tokens(tiny):
    pytest.importorskip("mlx_lm")
    import mlx.core as mx
    from mlx_lm.generate import generate_step

    folder, weights, _ = tiny
    engine = backends.get("mlx")
    model = engine.load(weights, "fp32")
    stream = mx.new_stream(model.device)
    ids = prompt_ids()
    tokens = [int(t) for t, _ in generate_step(mx.array(ids[0].astype(np.int32)), model.model, stream,
                                               max_tokens=NEW)]
    assert tokens == reference_tokens(folder, ids)
    int4 = engine.load(weights, "int4")
    assert int4.facts["weight_format"] == "q4 affine" and "groups of 32" in int4.facts["int8_method"]
    assert int4.facts["weight_bytes"] < model.facts["weight_bytes"] / 3
    metrics, samples = engine.bench(int4, prompt_len=PROMPT, new_tokens=NEW, depth=5, batch=1, budget_s=0.05)
    assert len(samples["decode_token_s"]) == len(samples["prefill_s"]) * (NEW - 1) > 0
    assert "after 5 cached" in metrics["runtime_tests"] and metrics["decode_tokens_per_s"] > 0


def test_mlx_devices_are_looked_up_never_guessed(monkeypatch):
    pytest.importorskip("mlx_lm")
    import mlx.core as mx

    from xpubench.backends.mlx_.model import device_of

    assert device_of("cpu") == mx.Device(mx.cpu)
    host = {"model": "Apple M2"}
    assert [d["kind"] for d in backends.get("mlx").detect(host)["devices"]] == ["cpu"]   # no Metal here
    monkeypatch.setattr(mx.metal, "is_available", lambda: False)
    with pytest.raises(Unsupported, match="no Metal device"):
        device_of("mps")
    # where Metal is available: the Apple GPU is xpubench's mps device, its memory as MLX reports it
    monkeypatch.setattr(mx.metal, "is_available", lambda: True)
    monkeypatch.setattr(mx, "device_info", lambda d: {"device_name": "Apple M2", "total_memory": 16 * 2**30})
    gpu = backends.get("mlx").detect(host)["devices"][1]
    assert (gpu["id"], gpu["name"], gpu["memory_bytes"]) == ("mps", "Apple M2 GPU", 16 * 2**30)
    assert device_of("mps") == mx.Device(mx.gpu)


# ---- both through xpubench run ------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_run_of_both_engines_records_their_figures_and_one_table_row_each(tiny, capsys, detected_once):
    pytest.importorskip("openvino_genai")
    pytest.importorskip("mlx_lm")
    from xpubench import analysis, cli

    folder, _, root = tiny
    out = root / "r.jsonl"
    code = cli.main(["run", "-w", "llama", "--weights", str(folder), "-b", "openvino,mlx", "-p", "fp32",
                     "--prompt-len", str(PROMPT), "--new-tokens", str(NEW), "--time-budget", "0.5", "--processes", "1",
                     "--no-progress", "-o", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    results = {r.case.backend: r for r in analysis.load([out])[0].results}
    assert {b: r.status for b, r in results.items()} == {"openvino": "ok", "mlx": "ok"}
    assert results["openvino"].metrics["engine_decode_tokens_per_s"] > 0 and results["mlx"].metrics["load_s"] > 0
    assert "a row per runtime and format" in printed
    rows = [ln.split() for ln in printed.splitlines() if " fp32 " in ln and ("openvino" in ln or "mlx" in ln)]
    assert {"openvino", "mlx"} <= {w for row in rows for w in row}
    assert os.environ["XDG_CACHE_HOME"] == str(root / "cache")
