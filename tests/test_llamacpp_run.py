"""llama.cpp for real: llama-quantize making q8_0 and q4_0 files of a GGUF xpubench wrote, and a llama-bench
run on a tiny random-weight model through ``xpubench run -b llamacpp``, recorded as llama workload cases,
then read by ``report`` and ``compare``. Skipped, with the reason, where no llama-bench is found
(``bash scripts/build_llamacpp.sh`` builds it; ``scripts/setup.sh test`` runs that)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("gguf")

from xpubench import analysis, cli
from xpubench.backends.llamacpp_ import binaries, gguf_file
from xpubench.workloads import get_workload

PROGRAMS = binaries.find()
needs_llamacpp = pytest.mark.skipif(PROGRAMS.bench is None, reason=str(PROGRAMS.missing))
# smollm-135m's proportions, tiny: 2 layers, 64 wide (a multiple of q4_0's and q8_0's blocks of 32)
TINY = {"n_layers": 2, "hidden_size": 64, "n_heads": 4, "n_kv_heads": 2, "intermediate_size": 128, "vocab_size": 512}


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """GGUFs written into the test's folder; the programs found as they are here (not from that cache)."""
    monkeypatch.setenv("XPUBENCH_LLAMACPP_DIR", str(PROGRAMS.bench.parent))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


@needs_llamacpp
@pytest.mark.parametrize(("fmt", "main_type"), [("int8", "Q8_0"), ("int4", "Q4_0")])
def test_llama_quantize_makes_the_quantised_file_from_the_f32_one(own_cache, fmt, main_type):
    llama = get_workload("llama")
    weights = llama.checkpoint(llama.spec_for(TINY), 0)
    path, cached = gguf_file.gguf_for(weights, fmt, PROGRAMS.quantize, 1)
    summary = gguf_file.tensor_summary(path)
    assert not cached and path.name.endswith(f"-{main_type.lower()}.gguf")
    assert max(summary["types"], key=summary["types"].get) == main_type
    f32, _ = gguf_file.gguf_for(weights, "fp32")                 # its source, cached by the first call
    assert summary["params"] == gguf_file.tensor_summary(f32)["params"]
    assert summary["weight_bytes"] < gguf_file.tensor_summary(f32)["weight_bytes"] / 3


@needs_llamacpp
@pytest.mark.slow
@pytest.mark.usefixtures("detected_once")   # this machine as detected once per test run (llama-bench's build in it)
def test_a_llama_bench_run_is_a_case_the_reports_read(own_cache, capsys):
    config = own_cache / "run.toml"
    config.write_text('[run]\nworkload = "llama"\nbackend = ["llamacpp"]\nprecision = ["fp32", "int8"]\n'
                      "processes = 1\ntime_budget = 1.0\n[run.options]\nprompt_len = 32\nnew_tokens = 16\n"
                      + "".join(f"{k} = {v}\n" for k, v in TINY.items()))
    out = own_cache / "r.jsonl"
    assert cli.main(["run", "--config", str(config), "-o", str(out)]) == 0
    results = {r.case.precision: r for r in analysis.load([out])[0].results}
    assert set(results) == {"fp32", "int8"}
    for precision, gguf_type in (("fp32", "f32"), ("int8", "q8_0")):
        r = results[precision]
        assert r.status == "ok", r.message
        m = r.metrics
        assert (m["weight_format"], m["prompt_len"], m["new_tokens"], m["batch"]) == (gguf_type, 32, 16, 1)
        assert "pp32 @ d0, tg15 @ d32" in m["runtime_tests"]          # decode steps after the prompt, as xpubench's
        assert len(r.samples["prefill_s"]) == len(r.samples["decode_token_s"]) == 2   # -r 2: a quick budget
        assert m["decode_tokens_per_s"] > 0 and m["prefill_tokens_per_s"] > 0
        assert m["params"] > 0 and m["model_bytes"] > 0 and m["threads"] >= 1
        assert m["decode_bytes_per_token"] > 0                        # the workload's bound: the same as torch's
    assert results["int8"].metrics["model_bytes"] < results["fp32"].metrics["model_bytes"] / 3
    build = results["fp32"].fingerprint["backends"]["llamacpp"]
    assert build["llama_bench"] == str(PROGRAMS.bench) and build["build"]
    capsys.readouterr()
    assert cli.main(["report", str(out), "-o", str(own_cache / "report.md"), "--format", "md"]) == 0
    assert "llamacpp" in (own_cache / "report.md").read_text()
    assert cli.main(["compare", str(out), str(out)]) == 0
    assert "llamacpp" in capsys.readouterr().out
    json.loads(out.read_text().splitlines()[-1])                       # the file is JSON Lines
