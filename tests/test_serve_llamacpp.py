"""``xpubench serve --server llamacpp`` against a real llama-server on 127.0.0.1, serving a tiny GGUF of
random weights the test writes (with xpubench's synthetic vocabulary), started and stopped by the command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xpubench.cli import main
from xpubench.workloads.llama.config import LlamaConfig

TINY = LlamaConfig("tiny", n_layers=2, hidden_size=64, n_heads=4, n_kv_heads=2, head_dim=16, intermediate_size=128,
                   vocab_size=1024, tie_embeddings=True, max_positions=2048)


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> Path:
    from xpubench import backends

    pytest.importorskip("gguf")
    missing = backends.get("llamacpp").server().missing
    if missing:
        pytest.skip(f"no llama.cpp build here: {missing}")
    from xpubench.serve.model import written

    cache = tmp_path_factory.mktemp("cache")
    return written(TINY, "q8_0", seed=3, environ={"XDG_CACHE_HOME": str(cache)}).path


def servers_of(path: Path) -> list[int]:
    """Processes whose command line names ``path`` (a server the command started: llama-server, or the
    stand-in vLLM of tests/test_serve_standin.py)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(path).encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return [pid for pid in found if pid != os.getpid()]


@pytest.mark.slow
def test_a_sweep_against_llama_server_is_measured_recorded_and_reported(tiny_gguf, tmp_path, capsys):
    from xpubench import analysis
    from xpubench.api import report

    out = tmp_path / "serve.jsonl"
    argv = ["serve", "--server", "llamacpp", "--weights", str(tiny_gguf), "-c", "1,2", "--input-len", "16",
            "--output-len", "8", "--requests", "4", "--warmup", "1", "--slo", "ttft=20s,itl=10s,p=50",
            "--price", "2.5", "-o", str(out)]
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "serves 2 concurrent users within TTFT 20 s and ITL 10 s (0.1 tok/s each)" in " ".join(said.split())
    assert servers_of(tiny_gguf) == []            # stopped when the sweep ended

    [loaded] = analysis.load([out])
    assert [r.status for r in loaded.results] == ["ok", "ok"]
    assert [(r.case.users, r.case.backend, r.case.device) for r in loaded.results] == [
        (1, "llamacpp", "cpu"), (2, "llamacpp", "cpu")]
    for r in loaded.results:
        m = r.metrics
        assert (m["requests"], m["completed"], m["failed"]) == (4, 4, 0)
        assert m["tokens_counted"] == "usage field" and m["mean_output_tokens"] == 8   # ignore_eos: to max_tokens
        assert m["mean_input_tokens"] >= 16                                            # the server's count (+BOS)
        assert m["server"].startswith("llama.cpp llama-server") and "-np 2" in m["server_command"]
        assert m["usd_per_1m_output_tokens"] > 0 and m["slo_attained"] == 1.0
        assert len(r.samples["e2e_s"]) == 4 and len(r.samples["itl_s"]) == 4 * 7
        assert all(req["output_tokens"] == 8 for req in r.artifacts["requests"])
        assert r.artifacts["server"]["props"]["total_slots"] == 2
        # its own figures beside the client's (llama-server --metrics): the requests it was processing (its
        # slots: none waits), its token counters over the window (the measured requests' 4 x 8 output tokens)
        assert 0 <= m["server_running_max"] <= r.case.users and m["server_waiting_max"] == 0
        assert m["server_output_tokens"] == 4 * 8 and m["server_prompt_tokens"] > 0
        assert "readings of /metrics within the window" in m["server_metrics"]
    html = report([out], tmp_path / "report.html")
    text = Path(html).read_text()
    assert 'id="serving"' in text and "TTFT p90" in text and "chart-serving-pareto" in text
    assert "Serving: served-" in text and "serves 2 concurrent users" in text
    capsys.readouterr()
    assert main(["compare", str(out), str(out)]) == 0     # two serving files: the same points matched
    said = capsys.readouterr().out
    assert said.count("e2e_s") >= 2 and "/c1/" in said and "/c2/" in said


@pytest.mark.slow
def test_the_chat_endpoint_streams_too(tiny_gguf, tmp_path, capsys):
    from xpubench.results import store

    out, text = tmp_path / "chat.jsonl", tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog " * 50)
    assert main(["serve", "--server", "llamacpp", "--weights", str(tiny_gguf), "--endpoint", "chat", "-c", "1",
                 "--input-len", "8", "--output-len", "4", "--requests", "2", "--warmup", "0", "--prompts", str(text),
                 "-o", str(out)]) == 0
    [run] = store.load_file(out).runs
    assert run.status == "ok" and run.metrics["endpoint"] == "/v1/chat/completions"
    assert run.metrics["mean_input_tokens"] > 8          # the chat template's tokens are the server's to count
    assert run.metrics["mean_output_tokens"] == 4
    assert not run.metrics.get("warning")                # the prompts were cut by the server's tokenizer


def test_a_checkpoint_folder_is_written_as_a_gguf_with_a_vocabulary(tmp_path, monkeypatch):
    gguf = pytest.importorskip("gguf")
    from xpubench.serve.model import resolve
    from xpubench.workloads.llama.checkpoint import random_hf_tensors, write_checkpoint

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = write_checkpoint(tmp_path / "ckpt", TINY, random_hf_tensors(TINY, 1))
    served = resolve(str(folder), None, "f32", 0, 1)
    assert served.path.is_file() and "the weights of" in served.origin and served.weight_format == "f32"
    reader = gguf.GGUFReader(str(served.path))
    model = reader.fields["tokenizer.ggml.model"]
    assert bytes(model.parts[-1]).decode() == "llama"
    assert len(reader.fields["tokenizer.ggml.tokens"].data) == TINY.vocab_size
    assert resolve(str(folder), None, "f32", 0, 1).path == served.path     # cached by the folder's files


@pytest.mark.slow
def test_each_points_rerun_command_measures_the_same_point_again(tiny_gguf, tmp_path, capsys):
    """The command the site prints under a serve run (plan/rerun.py), its weights given, records the same
    keys: a closed-loop point and an open-loop one."""
    from xpubench.case import Case
    from xpubench.plan.rerun import rerun_arguments
    from xpubench.results import store
    from xpubench.serve.rerun import WEIGHTS

    first = tmp_path / "first.jsonl"
    assert main(["serve", "--server", "llamacpp", "--weights", str(tiny_gguf), "-c", "1", "--rate", "4",
                 "--input-len", "8", "--output-len", "4", "--requests", "2", "--warmup", "0", "-o", str(first)]) == 0
    keys = [run.key for run in store.load_file(first).runs]
    assert len(keys) == 2 and any("/r4/" in key for key in keys)
    again = []
    for i, run in enumerate(store.load_file(first).runs):
        args, _ = rerun_arguments(Case.from_dict(run.case))
        out = tmp_path / f"{i}.jsonl"
        assert main([str(tiny_gguf) if word == WEIGHTS else word for word in args] + ["-o", str(out)]) == 0
        again += [r.key for r in store.load_file(out).runs]
    capsys.readouterr()
    assert set(keys) <= set(again)
