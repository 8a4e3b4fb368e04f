"""``xpubench serve``'s bad input: one line on stderr and exit 2, before any server is started or loaded."""

from __future__ import annotations

import pytest

from xpubench.cli import main
from xpubench.serve.server import free_port


@pytest.mark.parametrize("argv, said", [
    ([], "give one of --url URL"),
    (["--url", "http://x", "--server", "llamacpp"], "give one of --url URL"),
    (["--url", "ftp://x"], "give an http:// or https:// address"),
    (["--url", "http://x", "--model", "smollm-135m"], "are for --server llamacpp"),
    (["--server", "llamacpp", "--weights", "a.gguf", "--model", "smollm-135m"], "not both"),
    (["--server", "llamacpp", "--slo", "ttft=fast"], "--slo ttft=fast"),
    (["--server", "llamacpp", "--lengths", "1k"], "--lengths 1k: write input/output"),
    (["--server", "llamacpp", "--scale", "-1"], "--scale -1"),
    (["--server", "llamacpp", "-c", "0"], "must be at least 1"),
    (["--server", "llamacpp", "--rate", "fast"], "rate"),
    (["--server", "llamacpp", "--prompts", "/nonexistent/text.txt"], "no such file"),
    (["--server", "llamacpp", "--endpoint", "embeddings"], "invalid choice"),
    (["--server", "llamacpp", "-o", "/nonexistent/dir/out.jsonl"], "does not exist"),
    (["--server", "llamacpp", "--weights", "/nonexistent.gguf"], "no such file or folder"),
    (["--server", "vllm"], "invalid choice"),
])
def test_bad_flags_are_one_line_and_exit_2(argv, said, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["serve", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_an_unreachable_url_is_one_line(capsys, tmp_path):
    port = free_port()     # nothing listens there
    assert main(["serve", "--url", f"http://127.0.0.1:{port}", "-o", str(tmp_path / "s.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot reach the server" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "s.jsonl").exists()


def test_a_gguf_without_a_vocabulary_is_refused(capsys, tmp_path):
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "novocab.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("no_vocab")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert main(["serve", "--server", "llamacpp", "--weights", str(path), "-o", str(tmp_path / "s.jsonl")]) == 2
    assert "has no vocabulary" in capsys.readouterr().err
