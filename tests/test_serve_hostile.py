"""``xpubench serve --url`` against a hostile server (tests/hostile_server.py): each command runs in a child
process (tests/peak_memory.py) whose peak resident memory is asserted under 400 MB, ends in bounded time,
fails the requests it must with their reasons, and leaves a results file its own readers accept."""

from __future__ import annotations

import pytest
from hostile_server import HostileServer
from peak_memory import Children

from xpubench.results import store

PEAK_MB = 400
LIMIT_S = 60          # a child still running then is killed (a hang), and the test fails
ARGS = ["-c", "1", "--requests", "2", "--warmup", "0", "--input-len", "4", "--output-len", "4",
        "--request-timeout", "2", "--point-timeout", "6"]


@pytest.fixture(scope="module")
def hostile():
    with HostileServer(lifetime_s=30) as server:
        yield server


@pytest.fixture(scope="module")
def children(tmp_path_factory):
    with Children(tmp_path_factory.mktemp("children")) as kids:
        yield kids


CASES = {   # behaviour -> the input, as docs/bad-input.md's rows say it
    "deep": "JSON nested 100,000 deep (the description, every stream event)",
    "odd": "a description of unexpected types (`data` a string, an id an object, a list for an object), "
           "stream events whose fields are lists, usage counts `\"4\"` and `-3`",
    "longline": "one unterminated 512 MB `data:` line",
    "bigbody": "a 512 MB description and a 512 MB error body",
    "gzip": "gzip bombs: 0.5 MB on the wire, 512 MB inflated (the description and the stream)",
    "trickle": "every answer one byte every 2 s, its status line included",
    "tricklestream": "the streams one byte every 2 s",
    "hugeusage": "a usage count of 400 digits",
    "deepmeta": "model metadata nested 60 deep",
    "bigid": "a model id of 8 MB",
}


def _run(hostile, children, out, behaviour: str):
    return children.run(["serve", "--url", hostile.url(behaviour), *ARGS, "-o", str(out)], LIMIT_S)


def _serve(hostile, children, tmp_path, behaviour: str, within_s: float, code: int = 0):
    """``xpubench serve`` at the behaviour's URL: it ended by itself within ``within_s`` with ``code``, its
    peak memory under PEAK_MB; (the results file read back, or None, and the child's stderr)."""
    out = tmp_path / "serve.jsonl"
    ended = _run(hostile, children, out, behaviour)
    assert not ended.killed and ended.seconds < within_s, f"{behaviour}: still running after {ended.seconds:.0f} s"
    assert ended.peak_mb < PEAK_MB, f"{behaviour}: peak resident memory {ended.peak_mb:.0f} MB"
    assert ended.code == code, ended.err[-2000:]
    assert "Traceback" not in ended.err
    return (store.load_file(out).runs if out.exists() else None), ended.err    # report reads every point


def _failures(runs) -> str:
    [run] = runs
    assert run.status == "error" and run.metrics["failed"] == 2
    return run.metrics["failure_reasons"]


def test_json_nested_100000_deep_is_each_request_failure(hostile, children, tmp_path):
    runs, _ = _serve(hostile, children, tmp_path, "deep", 30)
    assert _failures(runs).startswith("2 x JSON nested too deeply to read in the stream")
    assert "/v1/models: JSON nested too deeply" in runs[0].metrics["warning"]


def test_a_description_of_odd_types_is_read_for_what_fits(hostile, children, tmp_path):
    [run], _ = _serve(hostile, children, tmp_path, "odd", 30)
    assert run.status == "ok" and run.metrics["model"] == "unknown"
    assert run.artifacts["server"]["props"] == {"total_slots": "many", "build_info": ["b"], "n_ctx": None}
    assert run.metrics["tokens_counted"] == "stream chunks (no usage field)"
    assert "2 of 2 requests: usage prompt_tokens and completion_tokens refused" in run.metrics["warning"]


def test_an_endless_line_is_cut_at_its_bound(hostile, children, tmp_path):
    runs, _ = _serve(hostile, children, tmp_path, "longline", 30)
    assert _failures(runs) == "2 x a line longer than 1 MiB after N chunks"


def test_a_large_description_and_error_body_are_read_within_their_bounds(hostile, children, tmp_path):
    runs, _ = _serve(hostile, children, tmp_path, "bigbody", 30)
    assert _failures(runs) == f"2 x HTTP 500: {'e' * 160}"
    assert "/v1/models: an answer larger than 16 MiB" in runs[0].metrics["warning"]


def test_a_gzip_bomb_is_inflated_within_its_bound(hostile, children, tmp_path):
    runs, _ = _serve(hostile, children, tmp_path, "gzip", 30)
    assert _failures(runs) == "2 x a line longer than 1 MiB after N chunks"
    assert "/v1/models: an answer larger than 16 MiB" in runs[0].metrics["warning"]


def test_a_server_that_trickles_its_description_is_one_line_within_the_deadline(hostile, children, tmp_path):
    runs, err = _serve(hostile, children, tmp_path, "trickle", 20, code=2)
    assert runs is None and "cannot reach the server (no answer within 2 s)" in err and len(err.splitlines()) == 1


def test_a_trickled_stream_ends_at_the_request_deadline(hostile, children, tmp_path):
    runs, _ = _serve(hostile, children, tmp_path, "tricklestream", 30)
    assert _failures(runs) == "2 x timed out after 2 s (N chunks seen)"


def test_a_huge_usage_count_is_refused_and_the_chunks_counted(hostile, children, tmp_path):
    [run], _ = _serve(hostile, children, tmp_path, "hugeusage", 30)
    assert run.status == "ok" and run.metrics["mean_output_tokens"] == 4
    assert "usage completion_tokens refused (not a count of 0 to 1,000,000,000)" in run.metrics["warning"]


def test_deep_server_metadata_is_recorded_cut(hostile, children, tmp_path):
    [run], _ = _serve(hostile, children, tmp_path, "deepmeta", 30)
    assert run.status == "ok" and "model_meta.a.a.a.a.a.a.a cut at 8 levels" in run.metrics["warning"]


def test_an_8_mb_model_id_is_recorded_cut_and_not_sent(hostile, children, tmp_path):
    [run], _ = _serve(hostile, children, tmp_path, "bigid", 30)
    assert run.status == "ok" and run.metrics["model"] == "m" * 256 + "..."
    assert "the model id cut to 256 of 8,388,608 characters" in run.metrics["warning"]
    assert "the requests named no model" in run.metrics["warning"]
    assert len(run.key) < 400


def _row(behaviour: str, ended, out) -> str:
    """docs/bad-input.md's row of one behaviour, from what the command did."""
    if ended.code == 2:
        happens = ended.err.strip()
    else:
        [run] = store.load_file(out).runs
        happens = (f"the point is an error result: `{run.message}`" if run.status != "ok" else "the point is measured")
        if run.metrics.get("warning"):
            happens += f"; its warning: `{run.metrics['warning']}`"
        happens += "; `report` reads the file"
    happens = happens.replace(str(out.parent), "DIR")
    return (f"| {CASES[behaviour]} | `xpubench serve --url URL/{behaviour} ...` | {happens} (peak "
            f"{round(ended.peak_mb, -1):.0f} MB, {ended.seconds:.0f} s) | {ended.code} |")


if __name__ == "__main__":      # the rows of docs/bad-input.md's "A hostile server" table, from real runs
    import re
    import tempfile
    from pathlib import Path

    with HostileServer(lifetime_s=30) as server, tempfile.TemporaryDirectory() as tmp, Children(Path(tmp)) as kids:
        print("| input from the server | command | what happens | exit code |\n|---|---|---|---|")
        for name in CASES:
            output = Path(tmp) / f"{name}.jsonl"
            row = _row(name, _run(server, kids, output, name), output)
            print(re.sub(r"http://127\.0\.0\.1:\d+", "URL", row).replace(f"URL/{name}:", "URL/NAME:"))
