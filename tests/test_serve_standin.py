"""vLLM and SGLang started for a serve sweep, with the lifecycle of llama-server (docs/serving.md, "The
server"): a free port, its health awaited, its version and command recorded, its own metrics read beside
each point's figures, stopped at the end. Neither installs on this CPU machine: tests/standin_server.py
stands in for both, with their command lines and routes, and can be told to exit at start or to die
mid-sweep. A sweep cut by Ctrl-C is finished by ``--resume``; a started server's sweep and a ``--url``
sweep of the same server are matched by ``compare``."""

from __future__ import annotations

import importlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from standin_server import VERSION, install
from test_serve_llamacpp import servers_of as _left

from xpubench.cli import main
from xpubench.results import store
from xpubench.workloads.llama.config import LlamaConfig

SRC = Path(__file__).resolve().parents[1] / "src"
TINY = LlamaConfig("tiny", n_layers=2, hidden_size=64, n_heads=4, n_kv_heads=2, head_dim=16, intermediate_size=128,
                   vocab_size=1024, tie_embeddings=True, max_positions=2048)
SWEEP = ["--input-len", "8", "--output-len", "4", "--requests", "3", "--warmup", "1"]


@pytest.fixture
def standin(tmp_path, monkeypatch) -> Path:
    """The stand-in ``vllm`` on PATH and ``sglang`` on the path, and a checkpoint folder with a tokenizer."""
    pytest.importorskip("httpx", reason="xpubench serve needs httpx")
    from xpubench.workloads.llama.checkpoint import random_hf_tensors, write_checkpoint

    where = install(tmp_path / "standin")
    monkeypatch.setenv("PATH", where["bin"] + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([where["packages"], str(SRC), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(where["packages"])
    importlib.invalidate_caches()
    monkeypatch.setenv("STANDIN_TOKEN_S", "0.05")
    folder = write_checkpoint(tmp_path / "tiny-chat", TINY, random_hf_tensors(TINY, 1))
    (folder / "tokenizer.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    return folder


def test_a_vllm_server_is_started_measured_recorded_and_stopped_and_its_url_sweep_compares(standin, tmp_path,
                                                                                          capsys):
    """``--server vllm``: started at a free port, serving the model under the points' name, its version and
    command and its own metrics recorded, stopped at the end. The same server started by hand and swept at
    its URL, on the device it runs on (-d cpu) and in its format (vLLM does not say it), keys its points
    alike: ``compare`` matches them."""
    from xpubench.serve.server import free_port

    started, at_url = tmp_path / "started.jsonl", tmp_path / "url.jsonl"
    assert main(["serve", "--server", "vllm", "--weights", str(standin), "-c", "1,2", *SWEEP, "-o", str(started)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert f"vLLM {VERSION} ready at http://127.0.0.1:" in said and "[2/2] 2 users in" in said
    runs = store.load_file(started).runs
    assert [(r.status, r.case["users"], r.case["backend"], r.case["device"]) for r in runs] == [
        ("ok", 1, "vllm", "cpu"), ("ok", 2, "vllm", "cpu")]
    name = runs[0].case["workload"]
    assert name.startswith("tiny-chat@") and name.endswith("-bfloat16")   # the checkpoint's name, digest, format
    assert runs[0].key == f"{name}/vllm/cpu/serve/bfloat16/c1/8/4/completions"
    for run in runs:
        m = run.metrics
        assert m["server"] == f"vLLM {VERSION}" and m["model"] == name and m["completed"] == 3
        assert m["server_command"].startswith(f"vllm serve {standin} --host 127.0.0.1 --port ")
        for words in (f"--served-model-name {name}", "--dtype bfloat16", "--max-num-seqs 2", "--max-model-len 76"):
            assert words in m["server_command"]
        # its own metrics over the window: its token counters agree with the client's, its gauges were read
        assert (m["server_output_tokens"], m["server_prompt_tokens"]) == (12, 3 * m["mean_input_tokens"])
        assert 1 <= m["server_running_max"] <= run.case["users"] and m["server_kv_cache_max"] > 0
        assert "readings of /metrics within the window" in m["server_metrics"]
    assert _left(standin) == []          # stopped when the sweep ended

    port = free_port()
    server = subprocess.Popen(["vllm", "serve", str(standin), "--port", str(port), "--served-model-name", name],
                              stdout=subprocess.DEVNULL)
    try:
        _healthy(port)
        assert main(["serve", "--url", f"http://127.0.0.1:{port}", "-d", "cpu", "--format", "bf16", "-c", "1,2",
                     *SWEEP, "-o", str(at_url)]) == 0
    finally:
        server.terminate()
        server.wait(timeout=10)
    keys = [[r.key for r in store.load_file(f).runs] for f in (started, at_url)]
    assert keys[0] == keys[1] and len(keys[0]) == 2
    capsys.readouterr()
    assert main(["compare", str(started), str(at_url)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "over 2 matching case(s)" in said
    # the server at the URL was started by hand: xpubench saw none of its machine (tests/test_compare_remote.py)
    assert "B: remote server: not seen by xpubench" in said and "not detected" not in said, said


def _healthy(port: int) -> None:
    import httpx

    for _ in range(300):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("the stand-in did not start")


def test_an_sglang_server_is_started_the_same_way(standin, tmp_path):
    out = tmp_path / "sglang.jsonl"
    assert main(["serve", "--server", "sglang", "--weights", str(standin), "-c", "1", *SWEEP, "-o", str(out)]) == 0
    [run] = store.load_file(out).runs
    m = run.metrics
    assert run.status == "ok" and run.case["backend"] == "sglang" and m["server"] == f"SGLang {VERSION}"
    assert m["server_command"].startswith(f"{sys.executable} -m sglang.launch_server --model-path {standin}")
    assert "--enable-metrics" in m["server_command"] and m["server_output_tokens"] == 12
    assert _left(standin) == []


def test_a_server_that_exits_at_start_is_one_line_and_exit_2(standin, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("STANDIN_EXIT_AT_START", "1")
    assert main(["serve", "--server", "vllm", "--weights", str(standin), "-c", "1", *SWEEP,
                 "-o", str(tmp_path / "v.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("xpubench: error: vLLM exited with status 1 before it was ready: stand-in vllm: cannot load "
                   f"{standin}: out of memory (as told)")
    assert not (tmp_path / "v.jsonl").exists()    # made for the sweep, holding nothing: removed again


def test_a_server_that_dies_mid_sweep_fails_that_point_and_resume_measures_the_rest(standin, tmp_path, capsys,
                                                                                  monkeypatch):
    """It dies at its 6th generation request (the second point's first measured one, after its warm-up): the
    first point is kept, the second records why it failed, the third is not run; --resume starts the server again
    and measures it."""
    out = tmp_path / "v.jsonl"
    monkeypatch.setenv("STANDIN_DIE_AFTER", "6")
    assert main(["serve", "--server", "vllm", "--weights", str(standin), "-c", "1,2,4", *SWEEP, "-o", str(out)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    first, second = store.load_file(out).runs
    assert first.status == "ok" and first.metrics["completed"] == 3
    assert second.status == "error" and second.message.startswith("vLLM exited with status 3 during the sweep: ")
    assert "stand-in vllm: dying at generation request 6" in second.message   # its log's last lines
    assert "1 point process(es) after it were not run (--resume runs them" in said
    assert _left(standin) == []
    monkeypatch.delenv("STANDIN_DIE_AFTER")
    assert main(["serve", "--resume", str(out)]) == 0
    runs = store.load_file(out).runs
    assert [(r.case["users"], r.status) for r in runs] == [(1, "ok"), (2, "error"), (4, "ok")]


def _metrics(port: str, name: str) -> str:
    """The stand-in's line of metric ``name``."""
    import httpx

    text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    return next((line for line in text.splitlines() if line.startswith(name)), "")


def test_a_sweep_cut_by_ctrl_c_keeps_its_points_and_resume_finishes_it(standin, tmp_path):
    """Ctrl-C while the second point runs: the first point and the cut one's finished requests are in the
    file, the command exits 130; --resume measures the cut point again, whole."""
    out = tmp_path / "v.jsonl"
    argv = [sys.executable, "-m", "xpubench", "serve", "--server", "vllm", "--weights", str(standin), "-c", "1,2",
            "--input-len", "8", "--output-len", "4", "--requests", "6", "--warmup", "0", "-o", str(out)]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in child.stdout:
        lines.append(line)
        if "[1/2] 1 user in" in line:   # the second point's worker starts now
            break
    port = re.search(r"--port (\d+)", "".join(lines)).group(1)
    while "_running" not in _metrics(port, "vllm:num_requests_running") or _metrics(
            port, "vllm:num_requests_running").endswith(" 0"):   # its requests in flight: cut them
        time.sleep(0.02)
    child.send_signal(signal.SIGINT)
    rest, _ = child.communicate(timeout=60)
    said = " ".join((("".join(lines)) + rest).split())
    assert child.returncode == 130, said
    assert f"interrupted (Ctrl-C): `xpubench serve --resume {out}` measures the points it lacks" in said
    first, cut = store.load_file(out).runs
    assert first.status == "ok" and first.metrics["completed"] == 6
    assert cut.case["users"] == 2 and cut.metrics["interrupted"] is True and "interrupted (Ctrl-C)" in (
        cut.metrics["warning"] + cut.message)
    assert _left(standin) == []
    assert main(["serve", "--resume", str(out)]) == 0
    from xpubench import analysis

    [loaded] = analysis.load([out])
    assert [(r.case.users, r.status, r.metrics["completed"], r.metrics.get("interrupted"))
            for r in loaded.results] == [(1, "ok", 6, None), (2, "ok", 6, None)]


def test_in_a_run_a_server_that_exits_at_start_is_each_of_its_points_failure(standin, tmp_path, monkeypatch, capsys):
    """`xpubench run --mode serve` goes on past a server that does not start (its other servers and cases
    would run): each point records why (and, nothing measured, run's exit 3), where `xpubench serve`, whose sweep
    is that server's, stops in one line."""
    monkeypatch.setenv("STANDIN_EXIT_AT_START", "1")
    out = tmp_path / "r.jsonl"
    assert main(["run", "-w", "llama", "-b", "vllm", "--mode", "serve", "--weights", str(standin), "-c", "1,2",
                 "--prompt-len", "8", "--new-tokens", "4", "--processes", "1", "--no-progress", "-o", str(out)]) == 3
    runs = store.load_file(out).runs
    assert [(r.case["users"], r.status) for r in runs] == [(1, "error"), (2, "error")]
    assert all(r.message.startswith("vLLM exited with status 1 before it was ready: stand-in vllm: cannot load")
               for r in runs)
    assert _left(standin) == []
