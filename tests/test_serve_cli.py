"""``xpubench serve``'s bad input: one line on stderr and exit 2, before any server is started or loaded."""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path

import pytest
from bad_input_doc import Case, check_row, run_case, untouched

from xpubench.cli import main

ROWS = [   # (input, the command with {dir}, what its one line says): docs/bad-input.md's rows of serve
    ("neither --url nor --server", "serve", "give one of --url URL"),
    ("both --url and --server", "serve --url http://x --server llamacpp", "give one of --url URL"),
    ("not an http address", "serve --url ftp://x", "give an http:// or https:// address"),
    ("nothing answers at the URL", "serve --url http://127.0.0.1:9 -o {dir}/s.jsonl", "cannot reach the server"),
    ("a model for a server given by --url", "serve --url http://x --model smollm-135m", "are for --server, not --url"),
    ("both --weights and --model", "serve --server llamacpp --weights a.gguf --model smollm-135m", "not both"),
    ("more than 100,000 requests per point", "serve --url http://x --requests 200000", "at most 100,000 per point"),
    ("an SLO that is not KEY=TIME", "serve --server llamacpp --slo ttft=fast", "--slo ttft=fast"),
    ("lengths not a pair", "serve --server llamacpp --lengths 1k", "--lengths 1k: write input/output"),
    ("a negative scale", "serve --server llamacpp --scale -1", "--scale -1"),
    ("concurrency 0", "serve --server llamacpp -c 0", "must be at least 1"),
    ("a rate that is not a number", "serve --server llamacpp --rate fast", "not a number of seconds"),
    ("a prompts file that is not there", "serve --server llamacpp --prompts {dir}/nope.txt", "no such file"),
    ("an endpoint it does not load", "serve --server llamacpp --endpoint embeddings", "invalid choice"),
    ("a server it does not know", "serve --server tgi", "invalid choice"),
    ("a server that is not installed", "serve --server sglang",
     "backend 'sglang' is not installed; pip install \"sglang[all]\""),
    ("weights that are not there", "serve --server llamacpp --weights {dir}/nope.gguf", "no such file or folder"),
    ("a GGUF without a vocabulary (a llama-bench file)", "serve --server llamacpp --weights {dir}/novocab.gguf",
     "the GGUF has no vocabulary (tokenizer no_vocab)"),
    ("`-o` in a folder that is not there", "serve --server llamacpp -o {dir}/nope/s.jsonl", "does not exist"),
    ("`-o` a file that is not a results file", "serve --url http://127.0.0.1:9 -o {dir}/notes.txt",
     "not an xpubench results file"),
    ("`-o` a link to a file", "serve --url http://127.0.0.1:9 -o {dir}/link.jsonl",
     "it is a link (results are never written through one)"),
    ("`-o` a dangling link", "serve --url http://127.0.0.1:9 -o {dir}/dangling.jsonl",
     "it is a link (results are never written through one)"),
    ("`-o` a file a `run` is writing", "serve --url http://127.0.0.1:9 -o {dir}/running.jsonl",
     "another xpubench run is writing"),
]


@contextlib.contextmanager
def _run_writing(out: Path):
    """What `xpubench run -o OUT` holds while it runs; the file left as it was."""
    from xpubench.launch.runfile import held

    with held(out, create=True), untouched(out.parent):
        yield


def _no_vocabulary(path: Path) -> None:
    import gguf

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("no_vocab")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def doc_cases(folder: Path) -> list[Case]:
    """Each refused in one line before a server is started or reached, the folder left as it was (a results
    file that cannot be written to is never created or changed)."""
    (folder / "notes.txt").write_text("my notes\n")
    (folder / "elsewhere.jsonl").write_text("")
    (folder / "link.jsonl").symlink_to(folder / "elsewhere.jsonl")
    (folder / "dangling.jsonl").symlink_to(folder / "nowhere.jsonl")
    _no_vocabulary(folder / "novocab.gguf")
    within = {"`-o` a file a `run` is writing": functools.partial(_run_writing, folder / "running.jsonl")}
    return [Case(name, "xpubench " + argv.format(dir=folder), says,
                 within=within.get(name, functools.partial(untouched, folder))) for name, argv, says in ROWS]


@pytest.mark.parametrize("name", [r[0] for r in ROWS])
def test_bad_input_is_one_line_and_exit_2(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    case = next(c for c in doc_cases(tmp_path) if c.input == name)
    check_row(case, run_case(case))


@pytest.fixture(scope="module")
def server():
    from hostile_server import HostileServer

    with HostileServer() as hostile:
        yield hostile


QUICK = ["-c", "1,2", "--requests", "2", "--warmup", "0", "--request-timeout", "5"]


def _serve(server, out, *more: str) -> int:
    return main(["serve", "--url", server.url("ok"), *QUICK, *more, "-o", str(out)])


def test_a_results_file_is_appended_to_after_its_torn_last_line_is_cut(server, tmp_path, capsys):
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
