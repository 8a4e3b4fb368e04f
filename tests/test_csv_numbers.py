"""Every CSV xpubench writes goes through one writer (report/base/csvfile.py; issue 51 item 8): `run -o -
--format csv`, `report -o - --format csv`, `compare --format csv` and the site's files quote a text cell that a
spreadsheet would take for a formula, and every output (CSV, JSON, Markdown) writes a whole number as the
whole number it is (``256``, ``2**53 + 1``), never as a float (``256.0``, ``9007199254740992``)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from bad_input_doc import Case, check_row, run_case

from xpubench.cli import main

SOURCE = Path(__file__).parent / "data" / "runs" / "default-zen3-quiet.jsonl"
FORMULA = ("=", "+", "-", "@", "\t", "\r")   # what a spreadsheet runs as a formula (OWASP)
BIG = 2**53 + 1                  # the first whole number a float64 cannot hold
FORMULAS = {"workload": '=HYPERLINK("http://x","y")', "key": "+SUM(1+1)/torch", "message": "-2+3+cmd|' /C calc'!A0",
            "hostname": "@SUM(A1)", "data": "\t=1+1", "precision": "\r=1+1"}


def hostile(folder: Path, name: str = "=evil.jsonl") -> Path:
    """A real results file whose mnist_cnn cases carry a formula in every text field and batch size 2**53 + 1,
    and whose matmul cases' workload makes their key (the case's, results/schema.py) start with FORMULAS' key."""
    lines = []
    for line in SOURCE.read_text().splitlines():
        r = json.loads(line)
        if r["case"]["workload"] == "matmul":
            r["case"]["workload"] = FORMULAS["key"].split("/")[0]
        if r["case"]["workload"] == "mnist_cnn":
            r["case"] |= {k: v for k, v in FORMULAS.items() if k in ("workload", "data", "precision")}
            r["case"]["batch_size"] = BIG
            r["message"] = FORMULAS["message"]
            r["fingerprint"]["hostname"] = FORMULAS["hostname"]
        lines.append(json.dumps(r))
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def _safe(rows: list[list[str]]) -> None:
    """No cell a spreadsheet would run: each formula-leading cell is a number (``-3.5``) or quote-led."""
    for row in rows:
        for cell in row:
            if cell.startswith(FORMULA):
                float(cell)


def _out(capsys) -> str:
    return capsys.readouterr().out


def test_report_csv_quotes_formulas_and_keeps_whole_numbers(tmp_path, capsys):
    path = hostile(tmp_path)
    assert main(["report", str(path), "-o", "-", "--format", "csv"]) == 0
    rows = _cells(_out(capsys))
    _safe(rows)
    head = rows[0]
    mnist = [dict(zip(head, r)) for r in rows[1:] if r[head.index("backend")] == "torch" and "HYPERLINK" in r[3]]
    assert mnist and mnist[0]["workload"] == "'" + FORMULAS["workload"] and mnist[0]["source"] == "'=evil"
    assert mnist[0]["batch_size"] == str(BIG) and mnist[0]["host"] == "'" + FORMULAS["hostname"]
    sizes = {dict(zip(head, r))["size"] for r in rows[1:]} - {""}
    assert sizes == {"2048"}                                        # never 2048.0


def test_run_to_stdout_as_csv_is_the_same_writer(tmp_path, capsys):
    """`run -o - --format csv` prints the run's Results through formats.print_results."""
    from xpubench import analysis
    from xpubench.publish.formats import print_results

    print_results(analysis.load([hostile(tmp_path)])[0].results, "csv")
    rows = _cells(_out(capsys))
    _safe(rows)
    assert any(r[rows[0].index("batch_size")] == str(BIG) for r in rows[1:])


def test_compare_csv_quotes_formulas_and_keeps_whole_numbers(tmp_path, capsys):
    a, b = hostile(tmp_path), hostile(tmp_path, "@other.jsonl")
    assert main(["compare", str(a), str(b), "--format", "csv"]) == 0
    rows = _cells(_out(capsys))
    _safe(rows)
    table = [dict(zip(rows[0], r)) for r in rows[1:]]
    assert {r["other"] for r in table} == {"'@other"}
    assert any(r["key"].startswith("'" + FORMULAS["key"]) for r in table)
    assert all(r["processes_a"].isdigit() and r["n_a"].isdigit() for r in table if r["processes_a"])


def test_the_sites_csv_files_quote_formulas(tmp_path):
    (tmp_path / "results").mkdir()
    hostile(tmp_path / "results")
    assert main(["site", str(tmp_path / "results"), "-o", str(tmp_path / "site"), "-j", "1"]) == 0
    files = list((tmp_path / "site").rglob("*.csv"))
    assert files
    for f in files:
        _safe(_cells(f.read_text()))
    assert any(str(BIG) in f.read_text() for f in files)


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_json_keeps_whole_numbers(fmt, tmp_path, capsys):
    assert main(["report", str(hostile(tmp_path)), "-o", "-", "--format", fmt]) == 0
    text = _out(capsys)
    rows = json.loads(text) if fmt == "json" else [json.loads(ln) for ln in text.splitlines()]
    assert {r["batch_size"] for r in rows} == {None, 1, BIG} and {r["size"] for r in rows} == {None, 2048}
    assert "2048.0" not in text


def test_markdown_keeps_whole_numbers(tmp_path, capsys):
    assert main(["report", str(hostile(tmp_path)), "-o", "-", "--format", "md"]) == 0
    text = _out(capsys)
    assert f"batch {BIG}" in text and str(BIG - 1) not in text and "2048.0" not in text


def doc_cases(folder: Path) -> list[Case]:
    """docs/bad-input.md's rows: what each CSV holds of a formula, and of 2**53 + 1."""
    path, other = hostile(folder), hostile(folder, "@other.jsonl")
    return [
        Case('a workload named =HYPERLINK("http://x","y")', f"xpubench report {path} -o - --format csv",
             '"\'=HYPERLINK(""http://x"",""y"")"', code=0),
        Case("a case key +SUM(1+1)/torch", f"xpubench compare {path} {other} --format csv",
             "'+SUM(1+1)/torch", code=0),
        Case("batch size 2**53 + 1", f"xpubench report {path} -o - --format csv", f",{BIG},", code=0),
        Case("batch size 2**53 + 1", f"xpubench report {path} -o - --format jsonl", f'"batch_size": {BIG}', code=0),
        Case("matrix size 2048 beside cases without one", f"xpubench report {path} -o - --format csv",
             ",fp32,,2048,,,1,", code=0),
    ]


@pytest.mark.parametrize("index", range(5))
def test_the_documented_rows(index, tmp_path):
    case = doc_cases(tmp_path)[index]
    check_row(case, run_case(case))
