"""The llama.cpp runtime's parts that need no llama.cpp: reading llama-bench's JSON Lines, the GGUF written
with gguf-py (read back with gguf-py's reader), where the programs are looked up, the CPU flags a build
is compiled with, adopting a finished build, and the reason a case is skipped when there is no llama-bench."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from xpubench.backends.llamacpp_ import bench, binaries, build
from xpubench.workloads.llama.checkpoint import random_hf_tensors
from xpubench.workloads.llama.config import PRESETS, LlamaConfig, to_hf_config

gguf = pytest.importorskip("gguf")
from xpubench.backends.llamacpp_ import gguf_file

DATA = Path(__file__).parent / "data" / "llamacpp"
TINY = LlamaConfig("tiny", n_layers=2, hidden_size=64, n_heads=4, n_kv_heads=2, head_dim=16, intermediate_size=96,
                   vocab_size=256, max_positions=128, tie_embeddings=True)
# Intel family 6 model 167 with AMX (the VM where a GGML_NATIVE build died on q8_0), and this project's Zen 2 CI
AMX_CPU = ("flags\t\t: fpu sse4_2 avx avx2 fma f16c bmi2 avx512f avx512cd avx512vl avx512dq avx512bw avx512vbmi "
           "avx512_vnni avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8\n")
AVX2_CPU = "flags\t\t: fpu sse4_2 avx avx2 fma f16c bmi2\n"


# ---- llama-bench's output ------------------------------------------------------------------------

def recorded() -> list[dict]:
    """Two records llama-bench 0c1e57098 printed with ``-o jsonl`` (a pp and a tg test of a tiny GGUF)."""
    return bench.parse_jsonl((DATA / "llama-bench.jsonl").read_text())


def test_llama_bench_records_are_read_with_their_samples():
    pp, tg = recorded()
    assert (pp["n_prompt"], pp["n_gen"], tg["n_prompt"]) == (64, 0, 0)
    assert len(pp["samples_ns"]) == len(pp["samples_ts"]) >= 2
    assert tg["n_depth"] == 64 and tg["n_gen"] == 31


def test_figures_are_named_as_the_generation_loop_names_them():
    pp, tg = recorded()
    metrics, samples = bench.figures(pp, tg, prompt_len=64, new_tokens=32)
    assert samples["prefill_s"] == [ns / 1e9 for ns in pp["samples_ns"]]
    assert samples["decode_token_s"] == pytest.approx([ns / 1e9 / 31 for ns in tg["samples_ns"]])
    assert metrics["prefill_tokens_per_s"] == pytest.approx(64 / np.median(samples["prefill_s"]))
    # as the loop's: one token over the median repetition's mean step (a repetition is a round), the time
    # the case folds, compares and shows beside it
    assert metrics["decode_token_s"] == pytest.approx(np.median(samples["decode_token_s"]))
    assert metrics["decode_tokens_per_s"] == pytest.approx(1 / metrics["decode_token_s"])
    # llama-bench's own rate of that repetition agrees with it (its samples_ts are tokens/s per repetition)
    assert metrics["decode_tokens_per_s"] == pytest.approx(np.median(tg["samples_ts"]), rel=1e-3)
    assert metrics["params"] == tg["model_n_params"] and metrics["model_bytes"] == tg["model_size"]
    assert metrics["threads"] == tg["n_threads"] and metrics["compile_s"] is None
    assert "pp64 @ d0, tg31 @ d64" in metrics["runtime_tests"]
    from xpubench.results import metrics as declared

    declared.check(metrics)          # every name is a declared figure of a generation result


@pytest.mark.parametrize("bad", ["not json", '{"avg_ns": 1}', "[1, 2]"])
def test_output_that_is_not_llama_bench_records_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="llama-bench"):
        bench.parse_jsonl(bad)


def test_the_command_asks_llama_bench_for_one_test_with_the_case_values():
    cmd = bench.command(Path("/x/llama-bench"), Path("m.gguf"), prompt=0, gen=127, depth=4608, threads=2, reps=5)
    assert cmd[1:] == ["-m", "m.gguf", "-p", "0", "-n", "127", "-d", "4608", "-t", "2", "-r", "5", "-o", "jsonl"]


# ---- the GGUF ------------------------------------------------------------------------------------

def test_gguf_round_trip_shapes_types_and_values(tmp_path):
    tensors = random_hf_tensors(TINY, seed=3)
    path = gguf_file.write_gguf(tmp_path / "t.gguf", to_hf_config(TINY), "bf16", tensors.items())
    reader = gguf.GGUFReader(str(path))
    found = {t.name: t for t in reader.tensors}
    assert "output.weight" not in found                        # tied: llama.cpp uses token_embd as the head
    assert len(found) == 1 + TINY.n_layers * 9 + 1
    q = found["blk.1.attn_q.weight"]
    assert [int(n) for n in q.shape] == [TINY.hidden_size, TINY.q_size]     # GGUF lists the inner axis first
    assert q.tensor_type == gguf.GGMLQuantizationType.BF16
    assert found["blk.1.attn_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32   # 1-D stays F32
    # the values: q permuted to llama.cpp's interleaved RoPE layout, as convert_hf_to_gguf.py does
    raw = np.asarray(q.data).view(np.uint16).astype(np.uint32) << 16
    stored = raw.view(np.float32).reshape(TINY.q_size, TINY.hidden_size)
    want = gguf_file.permute(tensors["model.layers.1.self_attn.q_proj.weight"], TINY.n_heads)
    np.testing.assert_allclose(stored, want, rtol=1 / 128)
    assert not np.allclose(stored, tensors["model.layers.1.self_attn.q_proj.weight"], rtol=1 / 128)
    fields = reader.fields
    assert bytes(fields["general.architecture"].parts[-1]).decode() == "llama"
    assert int(fields["llama.vocab_size"].parts[-1][0]) == TINY.vocab_size
    assert bytes(fields["tokenizer.ggml.model"].parts[-1]).decode() == "no_vocab"


def test_permute_pairs_each_heads_halves():
    w = np.arange(8, dtype=np.float32)[:, None]               # one head of 8 rows: halves 0-3 and 4-7
    assert gguf_file.permute(w, 1)[:, 0].tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


def test_llama3_rope_scaling_becomes_a_rope_freqs_tensor():
    factors = gguf_file.rope_factors(to_hf_config(PRESETS["llama-1b"]))
    assert factors.shape == (PRESETS["llama-1b"].head_dim // 2,)
    assert factors[0] == 1.0 and factors[-1] == PRESETS["llama-1b"].rope_scaling.factor
    assert gguf_file.rope_factors(to_hf_config(PRESETS["smollm-135m"])) is None


def test_written_files_are_cached_by_the_weights_digest_and_format(tmp_path, monkeypatch):
    """The workload's checkpoint folder (random weights of a seed, written once) becomes one GGUF per format;
    another seed is other weights, so another file."""
    from xpubench.workloads import get_workload

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    llama = get_workload("llama")
    spec = llama.spec_for({"n_layers": 1, "hidden_size": 64, "n_heads": 4, "n_kv_heads": 2,
                           "intermediate_size": 96, "vocab_size": 256})
    weights = llama.checkpoint(spec, 0)
    assert weights.folder.parent == tmp_path / "xpubench" / "checkpoints" and weights.seed == 0
    assert llama.checkpoint(spec, 0) == weights                   # written once, found again
    first, cached = gguf_file.gguf_for(weights, "fp16")
    again, cached_again = gguf_file.gguf_for(weights, "fp16")
    other, _ = gguf_file.gguf_for(llama.checkpoint(spec, 1), "fp16")
    assert (cached, cached_again, again) == (False, True, first) and other != first
    assert first.parent == tmp_path / "xpubench" / "gguf"
    assert gguf_file.tensor_summary(first)["types"] == {"F16": 1 + 7, "F32": 3}
    with pytest.raises(Exception, match="llama-quantize"):      # q8_0 needs the quantizer
        gguf_file.gguf_for(weights, "int8", quantizer=None)


# ---- finding the programs, the build's flags -----------------------------------------------------

def fake_program(folder: Path, name: str = "llama-bench", text: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{text}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_cpu_options_are_explicit_and_never_amx():
    amx = binaries.cpu_options(binaries.cpu_flags(AMX_CPU))
    assert amx["GGML_AVX512"] and amx["GGML_AVX512_BF16"] and amx["GGML_AVX512_VBMI"]
    avx2 = binaries.cpu_options(binaries.cpu_flags(AVX2_CPU))
    assert avx2["GGML_AVX2"] and avx2["GGML_FMA"] and not avx2["GGML_AVX512"]
    flags = build.cmake_flags(amx, "0c1e570")
    assert "-DGGML_NATIVE=OFF" in flags and "-DGGML_AMX_INT8=OFF" in flags and "-DGGML_AVX512=ON" in flags
    assert "-DLLAMA_CURL=OFF" in flags and "-DLLAMA_USE_PREBUILT_UI=OFF" in flags
    assert binaries.build_key(amx) != binaries.build_key(avx2)


def test_programs_are_found_in_the_order_documented(tmp_path):
    mine = fake_program(tmp_path / "mine" / "bin")
    on_path = fake_program(tmp_path / "path")
    env = {"PATH": str(tmp_path / "path"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert binaries.find(env, set()).bench == on_path
    assert binaries.find({**env, "XPUBENCH_LLAMACPP_DIR": str(tmp_path / "mine")}, set()).bench == mine
    wrong = binaries.find({**env, "XPUBENCH_LLAMACPP_DIR": str(tmp_path / "nothing")}, set())
    assert wrong.bench is None and "XPUBENCH_LLAMACPP_DIR" in wrong.missing
    none = binaries.find({"PATH": str(tmp_path / "empty"), "XDG_CACHE_HOME": str(tmp_path / "cache")}, set())
    assert none.bench is None and "scripts/build_llamacpp.sh" in none.missing


def test_a_finished_build_is_adopted_into_the_cache_and_found_there(tmp_path, monkeypatch):
    src = tmp_path / "llama_cpp_python-0.3.36"
    (src / "vendor" / "llama.cpp").mkdir(parents=True)
    (src / "CHANGELOG.md").write_text("- feat: update llama.cpp to ggml-org/llama.cpp@0c1e57098\n")
    done = tmp_path / "llbuild"
    fake_program(done / "bin")
    fake_program(done / "bin", "llama-quantize")
    (done / "CMakeCache.txt").write_text(f"CMAKE_HOME_DIRECTORY:INTERNAL={src}/vendor/llama.cpp\n"
                                         "GGML_AVX:BOOL=ON\nGGML_AVX2:BOOL=ON\nGGML_FMA:BOOL=ON\nGGML_NATIVE:BOOL=OFF\n"
                                         "GGML_AVX512:BOOL=ON\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(RuntimeError, match="GGML_AVX512, which this CPU lacks"):
        build.adopt(done, binaries.cpu_flags(AVX2_CPU))
    (done / "CMakeCache.txt").write_text((done / "CMakeCache.txt").read_text()
                                         .replace("AVX512:BOOL=ON", "AVX512:BOOL=OFF"))
    dest = build.adopt(done, binaries.cpu_flags(AVX2_CPU))
    record = json.loads((dest / "build.json").read_text())
    assert record["commit"] == "0c1e57098" and record["adopted_from"] == str(done)
    assert record["programs"] == ["llama-bench", "llama-quantize"]                 # no llama-server in that one
    found = binaries.find({"XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": ""}, binaries.cpu_flags(AVX2_CPU))
    assert found.bench == dest / "bin" / "llama-bench" and found.source == "cache"
    assert found.quantize == dest / "bin" / "llama-quantize" and found.build["commit"] == "0c1e57098"
    # a CPU without AVX2 does not take it (it would die with "Illegal instruction")
    assert binaries.find({"XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": ""}, {"sse4_2"}).bench is None


def test_a_case_without_llama_bench_is_skipped_with_the_reason(tmp_path, monkeypatch):
    from xpubench.backends import get
    from xpubench.case import Case

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("XPUBENCH_LLAMACPP_DIR", raising=False)
    case = Case(workload="llama", backend="llamacpp", device="cpu", mode="generate", precision="fp32", batch_size=1)
    assert "no llama-bench found" in get("llamacpp").unsupported(case)
    for other, why in (({"mode": "train"}, "generation only"), ({"precision": "tf32"}, "no tf32"),
                       ({"batch_size": 4}, "batch 1"), ({"device": "gpu:0"}, "CPU build")):
        assert why in get("llamacpp").unsupported(dataclasses.replace(case, **other))
    assert os.environ["PATH"] == str(tmp_path)


def test_int4_groups_other_than_q4_0s_have_no_llama_cpp_format(tmp_path):
    from xpubench.backends import get
    from xpubench.workloads.base import Weights

    weights = Weights(tmp_path, {}, "d", "tiny", int4_group=128)
    assert "groups of 32 weights; int4_group_size 128" in get("llamacpp").cannot_load(weights, "int4")
    assert get("llamacpp").cannot_load(weights, "int8") is None


# ---- the whole path through `xpubench run`, with a stand-in llama-bench ----------------------------

@pytest.mark.slow
def test_a_run_records_what_llama_bench_printed_as_a_llama_case(tmp_path, monkeypatch):
    """``xpubench run -b llamacpp`` with tests/data/llamacpp/fake-llama-bench as llama-bench: the GGUF is
    written, both tests are asked with the case's lengths, threads and depth, and what it printed becomes a
    generation result of the llama workload."""
    from xpubench import analysis, cli

    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "llama-bench").symlink_to(DATA / "fake-llama-bench")
    monkeypatch.setenv("XPUBENCH_LLAMACPP_DIR", str(folder))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    config = tmp_path / "run.toml"
    config.write_text('[run]\nworkload = "llama"\nbackend = ["llamacpp"]\nprecision = ["fp32", "int8"]\n'
                      "processes = 1\n[run.options]\nprompt_len = 40\nnew_tokens = 11\nn_layers = 1\n"
                      "hidden_size = 64\nn_heads = 4\nn_kv_heads = 2\nintermediate_size = 96\nvocab_size = 256\n")
    out = tmp_path / "r.jsonl"
    assert cli.main(["run", "--config", str(config), "-o", str(out)]) == 0
    results = {r.case.precision: r for r in analysis.load([out])[0].results}
    # int8 needs llama-quantize, which the stand-in folder lacks: skipped, and saying so
    assert results["int8"].status == "skipped" and "llama-quantize" in results["int8"].message
    r = results["fp32"]
    assert r.status == "ok", r.message
    m = r.metrics
    assert r.samples["prefill_s"] == pytest.approx([0.040 + i * 1e-6 for i in range(5)])       # 40 x 1 ms, -r 5
    assert r.samples["decode_token_s"] == pytest.approx([(0.1 + i * 1e-6) / 10 for i in range(5)])  # 10 steps
    assert m["runtime_tests"].startswith("pp40 @ d0, tg10 @ d40")
    assert m["decode_tokens_per_s"] == pytest.approx(50 / sum(0.1 + i * 1e-6 for i in range(5)))
    assert m["weight_format"] == "f32" and m["params"] == 12345 and m["runtime_build"] == "llama.cpp fake000 (1)"
    assert m["threads"] == bench.usable_threads() and "F32" in m["gguf_types"]
    gguf_path = next((tmp_path / "cache" / "xpubench" / "gguf").glob("*-f32.gguf"))
    assert m["model_bytes"] == gguf_path.stat().st_size                                  # what llama-bench loaded
    assert m["decode_bytes_per_token"] > 0 and m["prefill_flops"] > 0                   # the workload's counts
    assert r.fingerprint["backends"]["llamacpp"]["build"]["commit"] == "fake000"
