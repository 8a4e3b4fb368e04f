"""Issue 31 (items 1, 4, 5, 6, 9): what a run accepts its readers accept; text from files and exceptions
is printed as text (no rich markup, no raw control characters) in the terminal and in reports; odd
text (``$...$``, lone surrogates, non-UTF-8 file names) never ends a report; reports, charts and plan
sidecars never written through a link or over a file xpubench did not write; the ceilings measurement
kept in sight when the cache cannot be written; an ASCII locale; a deleted working folder; a repeated
flag. docs/bad-input.md's rows of issue 31 are these tests.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import report_runs

from xpubench import cli

DATA = Path(__file__).parent / "data"
SEED = DATA / "records" / "seed.jsonl"
MACHINE = DATA / "machines" / "h100-sxm.json"
HOSTILE = "[/x] [batch, features] $x^$ \udcff \x1b]0;pwned\x07\x1b[2J"
ESC = "\x1b"


def _records() -> list[dict]:
    return [json.loads(line) for line in SEED.read_text().splitlines()]


def hostile_file(tmp_path: Path, *, keys: bool = False) -> Path:
    """seed.jsonl with the hostile text in every device name, message and host name (and keys, through the
    precision: a case's key is made of its fields, results/schema.py)."""
    out = []
    for r in _records():
        for backend in r["fingerprint"].get("backends", {}).values():
            for device in backend.get("devices", []):
                device["name"] = f"CPU {HOSTILE}"
        r["message"] = f"boom {HOSTILE}"
        r["fingerprint"]["hostname"] = f"host {HOSTILE}"
        if keys:
            r["case"]["precision"] += HOSTILE
        out.append(json.dumps(r))
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(out) + "\n")
    return path


def cli_run(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(code: int, err: str, says: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("xpubench: error: "), (code, err)
    assert says in lines[0], lines
    assert "Traceback" not in err


# -- item 1: whatever a run accepts, its readers accept ------------------------------------------------

@pytest.mark.parametrize("flags,says", [
    (["--time-budget", "1e101"], "time_budget_s must be a finite number of at most 1e+100"),
    (["--seed", str(2 ** 63)], "seed must be a whole number of at least -9223372036854775808 and at most"),
    (["--size", "9" * 23], "size must be a whole number of at least 1 and at most 9223372036854775807"),
    (["--price-per-hour", "gpu=1e101"], "price_per_hour must be a finite number of at most 1e+100"),
])
def test_a_plan_the_results_reader_would_refuse_is_refused_before_anything_runs(flags, says, capsys):
    code, _, err = cli_run(capsys, "run", "-w", "matmul", "-b", "torch", *flags, "--dry-run", "--env-file", MACHINE)
    one_line(code, err, "a results file could not hold this case")
    assert says in err


def test_a_batch_size_of_23_digits_is_one_line(capsys):
    code, _, err = cli_run(capsys, "run", "-w", "mnist_cnn", "-b", "torch", "--batch-size", "9" * 23, "--dry-run",
                           "--env-file", MACHINE)
    one_line(code, err, "batch_size must be a whole number of at least 1 and at most 9223372036854775807")


@pytest.mark.parametrize("flags,says", [
    (["--timeout", "1e101"], "--timeout must be a number of seconds above 0 (at most 1e+100)"),
    (["--budget", "1e101"], "--budget must be a number of seconds above 0 (at most 1e+100)"),
    (["--memory-limit", "9" * 23], "--memory-limit must be below 8E"),
])
def test_run_settings_a_plan_sidecar_cannot_hold_are_refused_before_the_output_is_made(flags, says, tmp_path,
                                                                                       capsys):
    out = tmp_path / "r.jsonl"
    code, _, err = cli_run(capsys, "run", "-w", "matmul", "-b", "numpy", "--size", "64", "--processes", "1", *flags,
                           "-o", out)
    one_line(code, err, says)
    assert not out.exists()


def test_the_largest_accepted_values_are_read_back():
    from xpubench.case import Case
    from xpubench.plan import readable
    from xpubench.results.validate import check_case

    case = Case("matmul", "numpy", "cpu", "matmul", size=2 ** 63 - 1, seed=-(2 ** 63), time_budget_s=1e100,
                options={"price_per_hour": 1e100})
    readable(case)   # accepted by the plan ...
    check_case(json.loads(json.dumps(case.as_dict())))   # ... and by the reader


# -- item 4: text from files and exceptions is text ---------------------------------------------------

def test_shown_escapes_control_characters_and_lone_surrogates_only():
    from xpubench.results.plaintext import markup, shown

    assert shown("a\x1b[2Jb\x07\udcff\u202e\tc\nd µ±") == "a\\x1b[2Jb\\x07\\udcff\\u202e\tc\nd µ±"
    assert markup("[/x] [batch, features]") == "\\[/x] \\[batch, features]"


def plain_console(buf: io.StringIO):
    """The commands' console, where it exists; rich's own on code before it (to see the old failures)."""
    try:
        from xpubench.results.plaintext import PlainConsole as Console
    except ImportError:
        from rich.console import Console
    return Console(file=buf, width=400, force_terminal=True, color_system=None)


def markup(text: str) -> str:
    try:
        from xpubench.results.plaintext import markup as escaped
    except ImportError:
        return text
    return escaped(text)


def _printed(*renderables, **kw) -> str:
    buf = io.StringIO()
    plain_console(buf).print(*renderables, **kw)
    return buf.getvalue()


def test_a_run_line_with_markup_and_escapes_in_its_message_prints_them_as_text():
    from xpubench.report.render.terminal import RunProgress
    from xpubench.results.schema import run_from_dict

    record = next(r for r in _records() if r["status"] == "error")
    record["message"] = f"ValueError: shape {HOSTILE}"
    record["case"]["key"] += "/[/bold]"
    buf = io.StringIO()
    progress = RunProgress(plain_console(buf), enabled=False)
    progress.plan([], 1, 1)
    progress.result(run_from_dict(record, where="t"))
    text = buf.getvalue()
    assert "[batch, features]" in text and "[/x]" in text and "/[/bold]" in text
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in text and "\\udcff" in text
    assert ESC not in text and "\x07" not in text


def test_markup_in_a_table_cell_or_a_print_is_text_and_never_a_markup_error():
    from rich.table import Table

    table = Table(title=markup(HOSTILE))
    table.add_column("x")
    table.add_row(markup(HOSTILE))
    text = _printed(table)
    assert text.count("[batch, features]") == 2 and "\x07" not in text
    assert "[/x] oops" in _printed("[/x] oops", highlight=False)   # a string never meant as markup: printed, not raised


def test_compare_prints_hostile_text_from_results_files_as_text(tmp_path, capsys):
    code, out, err = cli_run(capsys, "compare", SEED, hostile_file(tmp_path))
    assert code == 0, err
    assert ESC not in out + err and "\x07" not in out + err
    assert "[batch, features]" in out and "\\x1b]0;pwned\\x07" in out


def test_compare_of_hostile_keys_is_one_line_with_the_keys_escaped(tmp_path, capsys):
    code, _, err = cli_run(capsys, "compare", SEED, hostile_file(tmp_path, keys=True))
    one_line(code, err, "nothing to compare")
    assert ESC not in err and "\\x1b" in err


def test_dry_run_of_an_env_file_with_hostile_fields_prints_them_as_text(tmp_path, capsys):
    env = json.loads(MACHINE.read_text())
    env["host"]["hostname"] = f"h {HOSTILE}"
    for info in env["backends"].values():
        for device in info.get("devices", []):
            device["name"] = f"GPU {HOSTILE}"
    path = tmp_path / "env.json"
    path.write_text(json.dumps(env))
    code, out, err = cli_run(capsys, "run", "-w", "matmul", "-b", "torch", "--dry-run", "--env-file", path)
    assert code == 0, err
    assert ESC not in out and "\x07" not in out


def test_env_rendering_of_hostile_fields_is_text():
    from xpubench.devices.render import render_environment

    env = json.loads(MACHINE.read_text())
    env["host"]["hostname"] = f"h {HOSTILE}"
    env["host"]["cpu"]["model"] = f"cpu {HOSTILE}"
    name = next(iter(env["backends"]))
    env["backends"][name]["error"] = f"ImportError {HOSTILE}"
    env["backends"][name].setdefault("devices", []).append({"id": "gpu:9", "kind": "gpu", "name": HOSTILE})
    buf = io.StringIO()
    render_environment(env, plain_console(buf))
    text = buf.getvalue()
    assert text.count("[batch, features]") >= 4 and "\x07" not in text and ESC not in text


def test_doctor_reasons_are_text():
    from xpubench.doctor import Row, render

    buf = io.StringIO()
    render([Row(check="matmul", status="FAIL", reason=f"RuntimeError: {HOSTILE}", backend="torch", device="cpu")],
           plain_console(buf))
    assert "[batch, features]" in buf.getvalue() and "\x07" not in buf.getvalue()


def test_an_error_line_shows_escapes_and_brackets_as_text(capsys):
    code, _, err = cli_run(capsys, "report", f"/nowhere/{HOSTILE}.jsonl", "-o", "/tmp/x.md")
    one_line(code, err, "[batch, features]")
    assert "\x07" not in err and "\\x1b]0;pwned" in err


# -- items 4, 5: Markdown and HTML reports of hostile text ----------------------------------------------

@pytest.fixture(scope="module")
def hostile_reports(tmp_path_factory) -> Path:
    """`xpubench report hostile.jsonl -o r.md` (its charts drawn, with the hostile text in their labels) and the
    HTML page r.html rendered from the report that command built (charts drawn once for both, ~2.5 CPU s)."""
    from report_runs import report_command_built

    from xpubench.report.render import html

    folder = tmp_path_factory.mktemp("hostile-report")
    report = report_command_built(["report", str(hostile_file(folder)), "-o", str(folder / "r.md")])
    (folder / "r.html").write_text(html.render(report), encoding="utf-8")
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".md", ".html"])
def test_report_of_dollars_surrogates_and_escapes_is_written_and_inert(suffix, hostile_reports):
    text = (hostile_reports / f"r{suffix}").read_text(encoding="utf-8")
    assert ESC not in text and "\x07" not in text
    if suffix == ".md":
        assert "\\[batch, features\\]" in text and "\\$x^\\$" in text and "\\\\udcff" in text
        assert all(p.read_bytes().startswith(b"\x89PNG") for p in (hostile_reports / "r_files").iterdir())


def test_a_dollar_in_a_device_name_is_drawn_as_text():
    from matplotlib.figure import Figure

    from xpubench.report.charts.performance import plain_text, png

    with plain_text():
        fig = Figure()
        ax = fig.add_subplot()
        ax.set_title("spec: GPU $x^$ fp32")
        ax.set_xticks([0, 1], labels=["$\\frac{", "b"])
        fig.tight_layout()   # draws: math would raise here
    assert png(fig).startswith(b"\x89PNG")


def test_a_results_record_with_a_non_utf8_model_file_name_round_trips_and_reports(tmp_path, capsys):
    from xpubench.results import store
    from xpubench.results.schema import run_from_dict

    name = b"m\xff.py".decode("utf-8", "surrogateescape")   # how Python gives a non-UTF-8 file name
    record = next(r for r in _records() if r["status"] == "ok" and r["case"]["mode"] == "train")
    record["case"]["options"].update(model=f"{name}:build", model_file=f"/tmp/{name}")
    record["case"]["key"] += f"/{name}"
    path = tmp_path / "u.jsonl"
    store.append(path, run_from_dict(record, where="t"))
    loaded = store.load_file(path)
    assert loaded.runs[0].case["options"]["model_file"] == f"/tmp/{name}"   # the same path, read back
    code, out, err = cli_run(capsys, "compare", path, path)
    assert code == 0 and "Traceback" not in err, err
    out.encode("utf-8")   # no lone surrogate reaches the terminal


# -- item 6: OUT_files, links, foreign files, atomic writes -------------------------------------------

@pytest.fixture
def quick_charts(monkeypatch):
    """Charts as tiny PNGs (report_runs.quick_charts): what is tested is where they are written."""
    report_runs.quick_charts(monkeypatch)


@pytest.fixture(scope="module")
def seed_report(tmp_path_factory) -> Path:
    """`xpubench report seed.jsonl -o r.md` (charts as tiny PNGs), written once for the tests below that
    start from a report and its charts folder xpubench wrote: each copies it (~1.3 CPU s a report)."""
    folder = tmp_path_factory.mktemp("seed-report")
    with pytest.MonkeyPatch.context() as patch:
        report_runs.quick_charts(patch)
        assert cli.main(["report", str(SEED), "-o", str(folder / "r.md")]) == 0
    return folder / "r.md"


def written_report(seed_report: Path, output: Path) -> Path:
    """A copy of seed_report at ``output``, with its charts folder beside it: a report xpubench wrote there."""
    output.write_bytes(seed_report.read_bytes())
    shutil.copytree(seed_report.with_name("r_files"), output.with_name(f"{output.stem}_files"))
    return output


def _charts(tmp_path: Path, seed_report: Path) -> list[Path]:
    written_report(seed_report, tmp_path / "r.md")
    charts = sorted((tmp_path / "r_files").glob("*.png"))
    assert charts
    return charts


@pytest.mark.slow
def test_links_in_the_charts_folder_are_refused_and_replaced_with_force_never_followed(tmp_path, capsys,
                                                                                         quick_charts, seed_report):
    charts = _charts(tmp_path, seed_report)
    victim = tmp_path / "results.jsonl"
    victim.write_bytes(SEED.read_bytes())
    for chart in charts:
        chart.unlink()
        chart.symlink_to(victim)
    code, _, err = cli_run(capsys, "report", SEED, "-o", tmp_path / "r.md")
    one_line(code, err, "exists and was not written by xpubench (a chart is written there)")
    code, _, err = cli_run(capsys, "report", SEED, "-o", tmp_path / "r.md", "--force")
    assert code == 0, err
    assert victim.read_bytes() == SEED.read_bytes()
    assert not any(c.is_symlink() for c in charts)


@pytest.mark.slow   # ~2 s: a report with its charts
def test_a_users_png_in_the_charts_folder_is_not_replaced_without_force(tmp_path, capsys, quick_charts,
                                                                        seed_report):
    charts = _charts(tmp_path, seed_report)
    charts[0].write_bytes(b"\x89PNG\r\n\x1a\nmy own picture")
    code, _, err = cli_run(capsys, "report", SEED, "-o", tmp_path / "r.md")
    one_line(code, err, "was not written by xpubench")
    assert charts[0].read_bytes().endswith(b"my own picture")
    assert cli_run(capsys, "report", SEED, "-o", tmp_path / "r.md")[0] == 2   # again: still the user's


def test_a_charts_folder_that_is_a_link_is_refused(tmp_path, capsys, quick_charts):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "r_files").symlink_to(tmp_path / "elsewhere")
    code, _, err = cli_run(capsys, "report", SEED, "-o", tmp_path / "r.md", "--force")
    one_line(code, err, "it is a symbolic link")
    assert not any((tmp_path / "elsewhere").iterdir())


def test_a_file_that_only_mentions_the_mark_is_the_users(tmp_path, capsys, quick_charts):
    doc = tmp_path / "reports.md"
    doc.write_text("# Reports\n\nEvery report starts with `<!-- generator: xpubench 1.0 -->`.\n")
    before = doc.read_bytes()
    code, _, err = cli_run(capsys, "report", SEED, "-o", doc)
    one_line(code, err, "exists and was not written by xpubench")
    assert doc.read_bytes() == before


@pytest.mark.slow
def test_an_output_link_is_replaced_not_written_through(tmp_path, capsys, quick_charts, seed_report):
    first = written_report(seed_report, tmp_path / "old.md")
    before = first.read_bytes()
    link = tmp_path / "r.md"
    link.symlink_to(first)
    code, _, err = cli_run(capsys, "report", SEED, "-o", link)
    assert code == 0, err
    assert not link.is_symlink() and first.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]   # no temporary left behind


@pytest.mark.slow
def test_a_plan_sidecar_xpubench_did_not_write_is_not_replaced(tmp_path, capsys, detected_once):
    out = tmp_path / "r.jsonl"
    sidecar = tmp_path / "r.jsonl.plan.json"
    sidecar.write_text("my notes\n")
    code, _, err = cli_run(capsys, "run", "-w", "matmul", "-b", "numpy", "--size", "64", "--processes", "1", "-o", out)
    one_line(code, err, "exists and is not an xpubench plan")
    assert sidecar.read_text() == "my notes\n"


def test_a_plan_sidecar_link_is_not_followed(tmp_path):
    from xpubench.errors import UserError
    from xpubench.launch.runfile import write_plan

    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (tmp_path / "r.jsonl.plan.json").symlink_to(victim)
    with pytest.raises(UserError, match="is not an xpubench plan"):
        write_plan(tmp_path / "r.jsonl", [], {})
    assert victim.read_text() == "keep"


# -- item 9: ceilings cache, locale, deleted working folder, repeated flags -----------------------------

def test_ceilings_measured_but_not_cacheable_are_printed_with_where(tmp_path, monkeypatch, capsys):
    from xpubench.ceilings import measure
    from xpubench.harness.ceiling import Ceiling

    env = json.loads((DATA / "machines" / "h100-sxm.json").read_text())
    env["backends"] = {"numpy": {"installed": True, "version": "2", "devices": [{"id": "cpu", "kind": "cpu"}]}}
    monkeypatch.setattr("xpubench.backends.detect.environment", lambda: env)
    monkeypatch.setattr(measure, "measure_in_subprocess", lambda b, d, ps, **kw: (
        [Ceiling(b, d, p, 91.5e9, (2048, 2048, 2048), 92e9, 0.01, 90e9, 92e9) for p in ps], None))
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))   # the cache folder cannot be made
    code, out, err = cli_run(capsys, "ceilings", "-b", "numpy", "--no-bandwidth")
    assert code == 0, err
    assert "fp32: 91.5 GFLOP/s" in out and f"not kept: the cache {blocker}" in out


def _python(argv: list[str], *, env: dict | None = None, cwd: str | None = None, shell_prefix: str = ""):
    environ = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src"), **(env or {})}
    command = [sys.executable, "-m", "xpubench", *argv]
    if shell_prefix:
        command = ["sh", "-c", shell_prefix + " exec " + " ".join(f"'{a}'" for a in command)]
    return subprocess.run(command, env=environ, cwd=cwd, capture_output=True, timeout=120, check=False)


@pytest.mark.parametrize("argv", [["list"], pytest.param(["compare", str(SEED), str(SEED)], marks=pytest.mark.slow)])
def test_an_ascii_locale_prints_ascii_look_alikes(argv):
    proc = _python(argv, env={"PYTHONUTF8": "0", "LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": ""})
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-600:]
    assert b"Traceback" not in proc.stderr
    proc.stdout.decode("ascii")   # nothing but ASCII
    assert b"2N^3" in proc.stdout or b"+-" in proc.stdout


def test_a_deleted_working_folder_is_one_line(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    proc = _python(["run", "-w", "matmul", "-b", "numpy", "--dry-run"],
                   shell_prefix=f"cd '{gone}' && rmdir '{gone}' &&")
    one_line(proc.returncode, proc.stderr.decode(), "the current folder no longer exists")


def test_a_repeated_list_flag_keeps_both_values(capsys):
    code, out, err = cli_run(capsys, "run", "-w", "matmul", "-b", "torch", "--size", "256", "--size", "512",
                             "--dry-run", "--env-file", MACHINE)
    assert code == 0, err
    assert "n256" in out and "n512" in out


@pytest.mark.parametrize("argv,says", [
    (["run", "-w", "matmul", "--seed", "1", "--seed", "2", "--dry-run"], "argument --seed: given twice (1, then 2)"),
    (["run", "-w", "matmul", "-o", "{tmp}/a.jsonl", "--output", "{tmp}/b.jsonl", "--dry-run"],
     "argument -o/--output: given twice"),
    (["report", str(SEED), "-o", "{tmp}/a.md", "-o", "{tmp}/b.md"], "argument -o/--output: given twice"),
])
def test_a_repeated_single_value_flag_is_refused(argv, says, tmp_path, capsys):
    code, _, err = cli_run(capsys, *(a.format(tmp=tmp_path) for a in argv))
    one_line(code, err, says)
    assert not list(tmp_path.iterdir())   # nothing written
