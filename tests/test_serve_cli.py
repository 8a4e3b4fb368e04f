"""``xpubench serve``'s bad input: one line on stderr and exit 2, before any server is started or loaded."""

from __future__ import annotations

import pytest

from xpubench.cli import main
from xpubench.serve.server import free_port


@pytest.mark.parametrize("argv, said", [
    ([], "give one of --url URL"),
    (["--url", "http://x", "--server", "llamacpp"], "give one of --url URL"),
    (["--url", "ftp://x"], "give an http:// or https:// address"),
    (["--url", "http://x", "--model", "smollm-135m"], "are for --server, not --url"),
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
    (["--server", "sglang"], "backend 'sglang' is not installed; pip install \"sglang[all]\""),
    (["--server", "tgi"], "invalid choice"),
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


@pytest.fixture(scope="module")
def server():
    from hostile_server import HostileServer

    with HostileServer() as hostile:
        yield hostile


QUICK = ["-c", "1,2", "--requests", "2", "--warmup", "0", "--request-timeout", "5"]


def _serve(server, out, *more: str) -> int:
    return main(["serve", "--url", server.url("ok"), *QUICK, *more, "-o", str(out)])


def test_output_that_is_not_a_results_file_is_refused_and_left_as_it_was(server, tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    assert _serve(server, notes) == 2
    assert "not an xpubench results file" in capsys.readouterr().err and notes.read_text() == "my notes\n"


@pytest.mark.parametrize("dangling", [False, True])
def test_output_through_a_link_is_refused(server, tmp_path, capsys, dangling):
    target, link = tmp_path / "elsewhere.jsonl", tmp_path / "serve.jsonl"
    link.symlink_to(target)
    if not dangling:
        target.write_text("")
    assert _serve(server, link) == 2
    assert "it is a link (results are never written through one)" in capsys.readouterr().err
    assert (not target.exists()) if dangling else target.read_text() == ""


def test_a_file_another_run_is_writing_is_refused(server, tmp_path, capsys):
    from xpubench.launch.runfile import held

    out = tmp_path / "serve.jsonl"
    with held(out, create=True):          # what `xpubench run -o serve.jsonl` holds while it runs
        assert _serve(server, out) == 2
    assert "another xpubench run is writing" in capsys.readouterr().err and out.read_text() == ""


def test_a_results_file_holding_results_is_refused_and_resume_cuts_its_torn_last_line(server, tmp_path, capsys):
    """As run's: -o writes a new or empty file (a sweep is finished with --resume, never appended to)."""
    from xpubench.results import store

    out = tmp_path / "serve.jsonl"
    assert _serve(server, out, "-c", "1") == 0
    assert _serve(server, out, "-c", "2") == 2
    assert "already holds results: choose another --output or --resume" in capsys.readouterr().err
    out.write_bytes(out.read_bytes() + b'{"schema_version": 2, "ca')      # a run killed mid-write
    assert main(["serve", "--resume", str(out)]) == 0
    assert [r.case["users"] for r in store.load_file(out).runs] == [1]
    assert "dropped an incomplete last line" in capsys.readouterr().out


def test_it_says_what_it_will_run_how_long_at_most_and_each_point_as_it_ends(server, tmp_path, capsys):
    assert _serve(server, tmp_path / "s.jsonl", "--point-timeout", "60") == 0
    said = " ".join(capsys.readouterr().out.split())
    assert ("2 points (closed loop: 1, 2 users), 2 measured requests each after a warm-up, 1,024 tokens in and "
            "1,024 out (--lengths 1k/1k, the default, unscaled: --scale 1/16 suits a small machine)") in said
    assert "at most 2 min (--point-timeout 60 s per point, --request-timeout 5 s per warm-up request)" in said
    assert "[1/2] 1 user in " in said and "[2/2] 2 users in " in said and "; about " in said


@pytest.mark.parametrize("busy, warned", [(0.9, True), (0.05, False)])
def test_a_busy_machine_is_warned_of_as_run_warns(server, tmp_path, capsys, monkeypatch, busy, warned):
    from xpubench.backends import fingerprint

    monkeypatch.setattr(fingerprint, "cpu_busy_fraction", lambda: busy)
    assert _serve(server, tmp_path / "s.jsonl", "-c", "1") == 0
    said = " ".join(capsys.readouterr().out.split())
    assert ("warning: other processes kept 90% of the CPU busy when the run started" in said) == warned
    assert ("CPU busy" in said) == warned


def test_the_table_fits_80_columns_with_every_number_whole(server, tmp_path, capsys, monkeypatch):
    from xpubench.results import store
    from xpubench.units import fmt_rate

    monkeypatch.setenv("COLUMNS", "80")
    out = tmp_path / "s.jsonl"
    assert _serve(server, out, "--slo", "ttft=10s,itl=1s") == 0
    shown = capsys.readouterr().out
    table = shown[shown.index("Serving sweep"):]
    assert "…" not in shown and max(len(line) for line in table.splitlines()) <= 80
    for run in store.load_file(out).runs:
        m = run.metrics
        row = next(line for line in table.splitlines() if line.startswith(f"{run.case['users']} user"))
        for cell in (f"{fmt_rate(m['ttft_p50_s'] * 1e3)}/{fmt_rate(m['ttft_p90_s'] * 1e3)}",
                     fmt_rate(m["output_tokens_per_s"]), fmt_rate(m["user_e2e_tokens_per_s"]), "0 of 2", "100%"):
            assert f" {cell} " in f" {row} ", (cell, row)


def test_the_table_keeps_large_figures_whole_at_80_columns():
    import io

    from xpubench.report.base.table import print_table
    from xpubench.report.tables.serving import sweep_table
    from xpubench.results.plaintext import PlainConsole

    points = [{"status": "ok", "concurrency": c, "request_rate": r, "ttft_p50_s": 12.345, "ttft_p90_s": 23.456,
               "tpot_p50_s": 1.2345, "tpot_p90_s": 2.3456, "e2e_p50_s": 1234.5, "output_tokens_per_s": 12345.6,
               "user_e2e_tokens_per_s": 1234.5, "requests": 64, "failed": 12, "slo_attained": 0.5}
              for c, r in ((64, None), (64, 0.25))]
    for terminal in (True, False):
        out = io.StringIO()
        print_table(sweep_table(points), PlainConsole(file=out, width=80, force_terminal=terminal, color_system=None))
        text = out.getvalue()
        assert max(len(line) for line in text.splitlines()) <= 80 and "…" not in text
        for cell in ("12,345/23,456", "1,234/2,346", "1,234", "12,346", "1,234", "12 of 64", "50%"):
            assert f" {cell} " in text.replace("\n", " \n"), (cell, text)


def test_the_budget_applies_to_a_sweep_as_to_a_run(server, tmp_path, capsys):
    """Issue 50: a point the --budget has no time for is recorded as skipped, no worker started (each point
    is estimated at its --duration and one request's time limit, beside its worker's start)."""
    from xpubench.results import store

    out = tmp_path / "s.jsonl"
    assert _serve(server, out, "--duration", "2", "--budget", "3") == 0
    runs = store.load_file(out).runs
    assert [(r.case["users"], r.status) for r in runs] == [(1, "skipped"), (2, "skipped")]
    assert all("budget" in r.message and "this case needs about" in r.message for r in runs)
    assert "none, skipped (the run's 3 s budget" in capsys.readouterr().out
