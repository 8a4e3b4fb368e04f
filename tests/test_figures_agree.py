"""One truth per screen (issue 52 item 1): every ratio xpubench prints agrees with the figures it prints beside
it, within the rounding of the printed digits, and every figure agrees with the time printed beside it. Read
from what is rendered of real recorded results files (tests/data): the summary and the answer `xpubench run`
prints, the report's Markdown and HTML, `xpubench compare` in the terminal, Markdown and HTML, and the static
site's pages (its tables and each run's report). Each N.NNx printed must be one that a check recomputed
(tests/rendered_ratios.py parses the text; nothing is taken from xpubench's own numbers)."""

from __future__ import annotations

import io
import re
import statistics
from pathlib import Path

import pytest
import report_runs
from rendered_ratios import (
    FIG,
    INTERVAL,
    RATIO,
    Checked,
    Table,
    boxed,
    fig,
    fixed_width,
    geometric,
    html_parts,
    lead_value,
    markdown_tables,
    ratio_tokens,
    unescape_md,
    within,
)
from rich.console import Console

DATA = Path(__file__).parent / "data"
RUNS = sorted((DATA / "runs").glob("*.jsonl"))
QUIET = DATA / "runs" / "default-zen3-quiet.jsonl"   # the brief default run on a quiet machine
COMPARED = [(DATA / "compare" / "first.jsonl", DATA / "compare" / "second.jsonl"),
            (DATA / "compare" / "first.jsonl", DATA / "compare" / "slow.jsonl"),
            (DATA / "gate" / "base.jsonl", DATA / "gate" / "slower.jsonl"),
            (DATA / "runs" / "default-zen3.jsonl", DATA / "runs" / "default-zen3-quiet.jsonl")]
RATE_BESIDE_TIME = (("warm", "warm time"), ("cold", "cold time"), ("samples/s", "step (p50)"), ("figure", "time"))
SAME_WORK = ("N", "batch", "dtype", "workload", "mode", "setting")   # rows alike in these did the same work
BIMODAL = re.compile(r"bimodal: \d+ of \d+ processes ran (\d+\.\d\d)x (slower|faster) than the others")


# ---- the relations -------------------------------------------------------------------------------------

def check_sentence(text: str, checked: Checked) -> None:
    """A sentence's ratio against the two figures beside it: "FIG against FIG" (the answer, the advice's
    break-even and precision lines) or "FIG; N.NNx the next, ... (FIG at batch" (the advice's fastest)."""
    clean = INTERVAL.sub("", text)
    tokens = [t for t in RATIO.findall(clean) if not BIMODAL.search(clean)]   # bimodal: check_bimodal
    if not tokens:
        return
    pair = re.search(rf"({FIG}) against ({FIG})", clean)
    nxt = re.search(rf"({FIG}); (\d+\.\d\d)x the next, .*?\(({FIG}) at ", clean)   # a name may hold "(...)"
    if nxt:
        pair, tokens = (None, nxt[1], nxt[3]), [nxt[2]]
    if pair is None or len(tokens) != 1:
        checked.check(False, None, f"{len(tokens)} ratio(s) without two figures beside them: {text}")
        return
    low, high = fig(pair[1]).speed_over(fig(pair[2]))
    checked.check(within(tokens[0], low, high), tokens[0],
                  f"{tokens[0]}x but {pair[1]} / {pair[2]} gives {low:.3f}-{high:.3f}: {text}")


def check_summary(table: Table, checked: Checked) -> dict[str, list]:
    """The summary: each row's fastest column holds its best figure and the ratio is it over the next.
    Returns {column: its figures in base units} for the answer's figures to be found in."""
    columns = table.header[table.header.index("dtype") + 1:table.header.index("fastest")]
    unit, seen = "", {c: [] for c in columns}
    for row in table.rows:
        unit = row["workload"].rsplit(" ", 1)[-1] if row["workload"] else unit
        figures = {c: fig(re.sub(r" ±\d+%", "", row[c].rstrip("!")) + f" {unit}") for c in columns
                   if fig(row[c]) is not None}
        for c, f in figures.items():
            seen[c].append(f)
        if len(figures) < 2 or not row.get("ratio"):
            continue
        lower = unit == "target"   # "s to target": the shorter the better
        ranked = sorted(figures.items(), key=lambda kv: kv[1].low, reverse=not lower)
        (best, a), (_, b) = ranked[0], ranked[1]
        ratio = row["ratio"].rstrip("~").removesuffix("x")
        low, high = (b.low / a.high, b.high / a.low) if lower else (a.low / b.high, a.high / b.low)
        checked.check(row["fastest"] == best or within("1.00", low, high), None,
                      f"fastest {row['fastest']} but {best} has the best figure: {row}")
        checked.check(within(ratio, low, high), ratio, f"ratio {ratio} but the figures give {low:.3f}-{high:.3f}: "
                                                       f"{row}")
    return seen


def runtime_table(lines: list[str]) -> Table | None:
    """The language models' table under the summary (a row per runtime and format), None where none is."""
    top = next((i for i, line in enumerate(lines) if "a row per runtime and format" in line), None)
    if top is None:
        return None
    end = next(i for i in range(top + 1, len(lines)) if lines[i].startswith("pp, tg:"))
    return fixed_width([lines[top + 1]] + [line for line in lines[top + 3:end] if line.strip()])


def check_runtime_table(table: Table | None, checked: Checked) -> dict[str, list]:
    """The language models' table: in each format of two runtimes or more, the one row marked fastest holds its
    best tg (a runtime alone in its format is not marked). Returns its
    figures ({"pp t/s": [...], "tg t/s": [...]}, tokens/s) for the answer's to be found in."""
    if table is None:
        return {}
    seen = {"pp t/s": [], "tg t/s": []}
    formats: dict[str, list] = {}
    for row in table.rows:
        for column, figures in seen.items():
            f = fig(row[column].rstrip(" !").split(" ±")[0] + " tok/s")
            if f is not None:
                figures.append(f)
        tg = fig(row["tg t/s"].rstrip(" !").split(" ±")[0] + " tok/s")
        formats.setdefault(row["format"], []).append((row["fastest"] == "fastest", tg, row))
    for fmt, rows in formats.items():
        marked = [(tg, row) for fastest, tg, row in rows if fastest]
        checked.check(len(marked) == (len(rows) > 1), None, f"{fmt}: {len(marked)} rows marked fastest: {rows}")
        for tg, row in marked:
            checked.check(all(tg.high >= other.low for _, other, _ in rows if other is not None), None,
                          f"{fmt}: {row} is marked fastest, but another row's tg is higher")
    return seen


def summary_and_runtimes(lines: list[str], checked: Checked) -> dict[str, list]:
    """Every figure of the summary (where one is) and of the language models' table, each checked."""
    seen = {}
    top = next((i for i, line in enumerate(lines) if line.strip().startswith("Summary")), None)
    if top is not None:
        end = next(i for i in range(top + 1, len(lines)) if lines[i].startswith(("figure:", "±")))
        seen = check_summary(fixed_width([lines[top + 1]] + [line for line in lines[top + 3:end] if line.strip()]),
                             checked)
    return {**seen, **check_runtime_table(runtime_table(lines), checked)}


def check_answer(lines: list[str], summary: dict[str, list], checked: Checked) -> None:
    """The answer's ratios against its figures, and its figures the summary's: one truth on the screen."""
    cells = [f for figures in summary.values() for f in figures]
    for line in lines:
        check_sentence(line, checked)
        pair = re.search(rf"({FIG}) against ({FIG})", INTERVAL.sub("", line))
        for text in pair.groups() if pair and cells else ():
            f = fig(text)
            checked.check(any(c.low <= f.high and f.low <= c.high for c in cells if c.kind == f.kind), None,
                          f"the answer's {text} is no figure of the summary above it: {line}")


def check_tables(tables: list[Table], checked: Checked) -> None:
    for table in tables:
        head = set(table.header)
        if {"A time", "B time", "speed"} <= head:
            check_backend_pairs(table, checked)
        if "B/A" in head:
            check_compare_rows(table, checked)
        for rate, time in RATE_BESIDE_TIME:
            if {rate, time} <= head:
                check_rate_beside_time(table, rate, time, checked)


def check_backend_pairs(table: Table, checked: Checked) -> None:
    """"jax is 1.09x faster than numpy" against the A and B times beside it."""
    for row in table.rows:
        times = {row["A"]: fig(row["A time"]), row["B"]: fig(row["B time"])}
        same = re.match(r"(.+) and (.+): the same \((\d+\.\d\d)x\)", row["speed"])
        faster = re.match(r"(.+) is (\d+\.\d\d)x faster than (.+?) \[", row["speed"])
        if same:
            low, high = times[row["A"]].speed_over(times[row["B"]])
            checked.check(within(same[3], low, high), same[3], f"the same but {low:.3f}-{high:.3f}: {row}")
        elif faster:
            low, high = times[faster[1]].speed_over(times[faster[3]])
            checked.check(within(faster[2], low, high), faster[2], f"{low:.3f}-{high:.3f}: {row}")


def check_compare_rows(table: Table, checked: Checked) -> None:
    """compare: B/A against the two times, and the verdict's N.NNx against B/A."""
    a_col = next(c for c in table.header if c.startswith("A: "))
    b_col = next(c for c in table.header if c.startswith("B: "))
    for row in table.rows:
        a, b, ba = fig(row[a_col]), fig(row[b_col]), fig(row["B/A"])
        if ba is None:
            continue
        low, high = b.low / a.high, b.high / a.low
        checked.check(within(row["B/A"], low, high), None, f"B/A {row['B/A']} but {low:.4f}-{high:.4f}: {row}")
        for token, word in re.findall(r"(\d+\.\d\d)x (slower|faster)", row["verdict"]):
            lo, hi = (ba.low, ba.high) if word == "slower" else (1 / ba.high, 1 / ba.low)
            checked.check(within(token, lo, hi), token, f"{token}x {word} but B/A {row['B/A']}: {row}")


def check_geometric_mean(text: str, tables: list[Table], checked: Checked) -> None:
    """compare's last line: the geometric mean of the B/A printed above it, and its words."""
    m = re.search(r"geometric mean of B/A over \d+ matching case\(s\): (\d+\.\d+) \((?:(\d+\.\d\d)x (slower|faster)|"
                  r"the same \((\d+\.\d\d)x\))\)", text)
    ratios = [fig(r["B/A"]) for t in tables if "B/A" in t.header for r in t.rows if fig(r["B/A"])]
    if not m or not ratios:
        return
    low, high = geometric(ratios)
    checked.check(within(m[1], low, high), None, f"geometric mean {m[1]} but {low:.4f}-{high:.4f}")
    g = fig(m[1])
    token = m[2] or m[4]
    lo, hi = (g.low, g.high) if m[3] != "faster" else (1 / g.high, 1 / g.low)
    checked.check(within(token, lo, hi) and (m[3] is not None or within("1.00", lo, hi)), token,
                  f"geometric mean {m[1]} said as {m[0]}")


def check_rate_beside_time(table: Table, rate: str, time: str, checked: Checked) -> None:
    """A rate and the time it comes from, side by side (matmul's warm and warm time, training's samples/s and
    step, the site's figure and time): rate x time, the work, is the same in rows that did the same work."""
    groups: dict[tuple, list] = {}
    for row in table.rows:
        r, t = fig(row[rate]), fig(row[time])
        if r is None or t is None or r.kind != "rate":
            continue
        parts = row.get("case", "").split("/")
        key = tuple(row.get(c) or lead_value(table, c) for c in SAME_WORK) + tuple(parts[:1] + parts[3:6])
        groups.setdefault(key, []).append((r.low * t.low, r.high * t.high, row))
    for rows in groups.values():
        checked.check(max(lo for lo, _, _ in rows) <= min(hi for _, hi, _ in rows) * (1 + 1e-9), None,
                      f"{rate} x {time} differs between rows that did the same work: {[r for _, _, r in rows]}")


def check_bimodal(tables: list[Table], checked: Checked) -> None:
    """"bimodal: 1 of 3 processes ran 1.32x faster than the others" against the process medians printed in
    the table of processes that disagreed: the largest gap parts them, the ratio is slow over fast."""
    medians: dict[str, list] = {}
    for table in tables:
        if {"process", "median"} <= set(table.header):
            for row in table.rows:
                medians.setdefault(row.get("case") or lead_value(table, "case"), []).append(fig(row["median"]))
    for table in tables:
        for row in table.rows:
            for cell in row.values():
                m = BIMODAL.search(cell)
                if m:
                    pm = sorted(medians.get(row.get("case") or lead_value(table, "case"), []), key=lambda f: f.low)
                    cut = max(range(len(pm) - 1), key=lambda i: pm[i + 1].low - pm[i].low) + 1 if pm else 0
                    fast, slow = pm[:cut], pm[cut:]
                    ok = bool(fast) and within(m[1], statistics.median(f.low for f in slow) / statistics.median(
                        f.high for f in fast), statistics.median(f.high for f in slow) / statistics.median(
                        f.low for f in fast))
                    checked.check(ok, m[1], f"{m[0]} but the process medians are {[f.text for f in pm]}")


def settle(checked: Checked, text: str) -> None:
    """Every ratio printed in ``text`` was recomputed, and none disagreed."""
    assert not checked.broken, "\n".join(checked.broken)
    assert sorted(checked.verified) == sorted(ratio_tokens(text)), (checked.where, checked.verified,
                                                                    ratio_tokens(text))


# ---- the renderings ------------------------------------------------------------------------------------

def console() -> Console:
    return Console(file=io.StringIO(), width=400, force_terminal=False, color_system=None)


@pytest.mark.parametrize("path", RUNS, ids=[p.stem for p in RUNS])
def test_the_summary_and_the_answer_of_a_run_agree(path):
    from xpubench.analysis import load
    from xpubench.report.render.terminal import print_run_output

    out = console()
    print_run_output(load([path]), out, "results.jsonl")
    text = out.file.getvalue()
    lines = text.splitlines()
    checked = Checked(f"{path.name} (terminal)")
    seen = summary_and_runtimes(lines, checked)
    checked.check(bool(seen), None, "no summary and no language models' table")
    answer = [line for line in lines[lines.index("Answer:"):] if line.startswith("- ")]
    check_answer(answer, seen, checked)
    settle(checked, text)


def stalls(record):
    """The recorded quiet run's llama cases with other decode steps, as the generation loop records them:
    torch's every round 14 steps of 10 ms and one of 300 ms (a stall: a recompile, a cache growing), JAX's
    an even 20 ms; the figures the loop derives from them beside (tok/s over the steps' total time)."""
    if not record["case"]["key"].startswith("llama/"):
        return None
    stalled = record["case"]["backend"] == "torch"
    rounds = record["metrics"]["rounds"]
    steps = [(0.300 if stalled and i == 14 else 0.010 if stalled else 0.020) * (1 + 1e-3 * ((i + r) % 3))
             for r in range(rounds) for i in range(15)]
    record["samples"]["decode_token_s"] = steps
    record["metrics"].update(decode_tokens_per_s=len(steps) / sum(steps), decode_token_s=statistics.median(steps),
                             decode_token_p50_s=statistics.median(steps))
    return record


def test_a_decode_that_stalls_ranks_by_its_rounds_on_the_whole_screen():
    """Issue 52's screen: a torch decode that stalls once a round generates more slowly than JAX's even one
    although its median single step is twice as fast; the summary said JAX (by the steps' total time) and
    the answer under it torch (by the median step). Both must say JAX, by the same figures."""
    from xpubench.analysis import load
    from xpubench.report.render.terminal import print_run_output

    out = console()
    print_run_output(load([report_runs.rewritten(QUIET, "stalls.jsonl", stalls)]), out, "results.jsonl")
    lines = out.file.getvalue().splitlines()
    rows = {row["runtime"]: row for row in runtime_table(lines).rows}
    # a round: (14 x 10 ms + 300 ms) / 15 = 29.3 ms against 20.0 ms (each x 1.001 on average)
    torch = rows["torch (eager decode)"]   # the brief run of then decoded eagerly
    assert rows["jax"]["fastest"] == "fastest" and torch["fastest"] == "", rows
    assert torch["tg t/s"].startswith("34.1 ") and rows["jax"]["tg t/s"].startswith("50.0 "), rows
    answer = next(line for line in lines if line.startswith("- smollm-135m 4/30 layers, pp64/tg16: "))
    assert "fastest jax cpu, " in answer and "as fast as torch (eager decode) cpu" in answer, answer
    checked = Checked("stalls (terminal)")
    check_answer([answer], summary_and_runtimes(lines, checked), checked)
    assert not checked.broken, checked.broken


def check_report_text(where: str, tables: list[Table], sentences: list[str], text: str) -> None:
    checked = Checked(where)
    check_tables(tables, checked)
    check_bimodal(tables, checked)
    for sentence in sentences:
        check_sentence(sentence, checked)
    settle(checked, text)


@pytest.fixture(scope="module", params=RUNS, ids=[p.stem for p in RUNS])
def report(request):
    from xpubench.analysis import load
    from xpubench.report.render.build import build_report

    return request.param, build_report(load([request.param]), charts=False)


def test_the_report_in_markdown_agrees(report, tmp_path):
    from xpubench.report.render import markdown

    path, built = report
    text = markdown.render(built, tmp_path / "report.md")
    lines = [unescape_md(line) for line in text.splitlines() if not line.startswith("|")]
    check_report_text(f"{path.name} (markdown)", markdown_tables(text), lines, text)


def test_the_report_in_html_agrees(report):
    from xpubench.report.render import html

    path, built = report
    tables, blocks = html_parts(html.render(built))
    check_report_text(f"{path.name} (html)", tables, blocks, "\n".join(blocks + [
        c for t in tables for r in t.rows for c in r.values()]))


@pytest.mark.parametrize(("a", "b"), COMPARED, ids=[f"{a.stem}-{b.stem}" for a, b in COMPARED])
def test_compare_agrees_in_every_format(a, b):
    from xpubench.report.compare import compare_files, render

    comparisons = compare_files(a, b)
    out = console()
    render(comparisons, "table", out)
    text = out.file.getvalue()
    tables = boxed(text.splitlines())
    checked = Checked(f"compare {a.name} {b.name} (terminal)")
    check_tables(tables, checked)
    check_geometric_mean(text, tables, checked)
    settle(checked, text)
    md = render(comparisons, "md")
    checked = Checked(f"compare {a.name} {b.name} (markdown)")
    check_tables(markdown_tables(md), checked)
    check_geometric_mean(md, markdown_tables(md), checked)
    settle(checked, md)
    tables, blocks = html_parts(render(comparisons, "html"))
    checked = Checked(f"compare {a.name} {b.name} (html)")
    check_tables(tables, checked)
    check_geometric_mean("\n".join(blocks), tables, checked)
    settle(checked, "\n".join(blocks + [c for t in tables for r in t.rows for c in r.values()]))


def test_the_site_agrees_on_every_page(tmp_path, monkeypatch):
    """Every page of a site of the recorded files: each workload's and run's table (a figure beside its time)
    and each run's report."""
    from xpubench.publish.site import build_site

    report_runs.quick_charts(monkeypatch)
    folder = tmp_path / "results"
    folder.mkdir()
    for path in RUNS:
        (folder / path.name).write_bytes(path.read_bytes())
    build_site(folder, tmp_path / "site", jobs=1, reports=True)
    pages = sorted((tmp_path / "site").rglob("*.html"))
    assert len([p for p in pages if p.name.endswith("-report.html")]) == len(RUNS)
    for page in pages:
        tables, blocks = html_parts(page.read_text())
        check_report_text(f"site {page.relative_to(tmp_path)}", tables, blocks,
                          "\n".join(blocks + [c for t in tables for r in t.rows for c in r.values()]))
