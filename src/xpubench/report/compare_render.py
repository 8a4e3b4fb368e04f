"""`xpubench compare` output: rich terminal tables, Markdown, a self-contained HTML page, or CSV. Rows are
grouped slower / faster / not significant / n/a (pyperf's ``compare_to --table -G``), each comparison ends
with the geometric mean of B/A, and with ``--fail-on`` the gate's verdict (report/compare_gate.py)."""

from __future__ import annotations

import pandas as pd
from rich.table import Table

from xpubench.legible.plaintext import markup
from xpubench.report.base import csvfile
from xpubench.report.base.cells import fmt_seconds
from xpubench.report.base.outputs import GENERATOR, html_comment
from xpubench.report.compare_gate import gate_lines, geometric_mean_line, group_of, grouped
from xpubench.report.render import html as html_out
from xpubench.report.render.markdown import md_bullets, md_escape, md_table
from xpubench.report.tables.environment import differences_title
from xpubench.results.modes import MODES


def explain(comparisons) -> str:
    change = comparisons[0].min_change if comparisons else 0.05
    samples = ", ".join(f"{m.label} {m.samples[0]}" + (" as each round's mean step" if m.samples[0] in m.rounds else "")
                        for m in MODES.values())   # results/modes.py
    text = (f"time = median of each case's worker-process medians of its raw samples ({samples}); B/A > 1 "
            "means B is slower; 95% CI from a seeded bootstrap over the "
            "processes, then the samples within them, of both files; a difference is called only when the CI "
            f"excludes 1, the change is at least {change:.0%} and every process of one side was slower than "
            "every process of the other.")
    if any(r.figure == "time_to_target" for c in comparisons for r in c.rows):
        text += (" Cases with a quality target compare their time to target instead: MLPerf's trimmed mean over "
                 "the seeds, B/A > 1 means B takes longer, 95% CI from a bootstrap over each side's seeds; a "
                 "difference is called when it excludes 1 and the change is at least "
                 f"{change:.0%}.")
    provisional = next((r.note for c in comparisons for r in c.rows if r.verdict.endswith("(provisional)")), None)
    if provisional:
        text += f" (provisional): {provisional}."
    return text


def _figure(seconds, n: int, processes: int) -> str:
    if not n:
        return fmt_seconds(seconds)
    return fmt_seconds(seconds) + (f" ({processes}x{round(n / processes)})" if processes > 1 else f" (n={n})")


def rows_frame(comparison, rows=None) -> pd.DataFrame:
    """One comparison's rows (or ``rows`` of it) as strings, in display order. A figure's (KxN): K processes
    of about N samples."""
    out = []
    for r in comparison.rows if rows is None else rows:
        quiet = ("", "the 95% interval contains 1")
        out.append({
            "case": r.key + (f" ({r.label})" if r.label else ""), "timing": r.figure or "n/a",
            f"A: {comparison.baseline}": _figure(r.median_a_s, r.n_a, r.processes_a),
            f"B: {comparison.other}": _figure(r.median_b_s, r.n_b, r.processes_b),
            "B/A": "n/a" if r.ratio is None else f"{r.ratio:.3f}",
            "95% CI": "n/a" if r.ci_low is None else f"{r.ci_low:.3f} - {r.ci_high:.3f}",
            "verdict": r.verdict + (f" ({r.note})" if r.note not in quiet and not r.verdict.endswith(
                "(provisional)") else ""),
        })
    return pd.DataFrame(out)


def _title(c) -> str:
    return f"{c.other} (B) against {c.baseline} (A)"


def _group_title(name: str, rows) -> str:
    return f"{name if name == 'n/a' else name.capitalize()} ({len(rows)})"


def csv_text(comparisons) -> str:
    """Every row of every comparison as CSV, numbers unformatted (seconds, ratios), one header line."""
    head = ["baseline", "other", "key", "label", "mode", "timing", "median_a_s", "median_b_s", "processes_a",
            "processes_b", "n_a", "n_b", "ratio", "ci_low", "ci_high", "significant", "group", "verdict", "note"]
    rows = ([c.baseline, c.other, r.key, r.label, r.mode, r.figure, r.median_a_s, r.median_b_s, r.processes_a,
             r.processes_b, r.n_a, r.n_b, r.ratio, r.ci_low, r.ci_high, r.significant, group_of(r), r.verdict, r.note]
            for c in comparisons for r in c.rows)
    return csvfile.csv_text(head, rows)


def print_tables(comparisons, console, *, to_file: bool = False, gate: dict | None = None) -> None:
    """The comparison as terminal tables; written to a file, its first line is "xpubench compare (GENERATOR)"."""
    if to_file:
        console.print(f"xpubench compare ({GENERATOR})", markup=False, highlight=False)
    for c in comparisons:
        if c.environment:
            console.print(f"[yellow]warning: {differences_title(c.environment)}:[/]", highlight=False)
            for line in c.environment:
                console.print(f"  - {line}", markup=False, highlight=False)
        if c.cases:
            console.print("[yellow]warning: the cases differ:[/]", highlight=False)
            for line in c.cases:
                console.print(f"  - {line}", markup=False, highlight=False)
        console.print(markup(_title(c)), style="bold", highlight=False)
        for name, rows in grouped(c.rows):
            frame = rows_frame(c, rows)
            table = Table(title=markup(_group_title(name, rows)), title_justify="left")
            for i, col in enumerate(frame.columns):
                table.add_column(col, justify="left" if i < 2 or col == "verdict" else "right",
                                 overflow="fold" if col == "case" else "ellipsis")   # a key is never cut short
            style = {"slower": "red", "faster": "green"}.get(name, "")
            for row in frame.itertuples(index=False):
                table.add_row(*[markup(v) for v in row], style=style)
            console.print(table)
        console.print(geometric_mean_line(c), markup=False, highlight=False)
        for line in c.curves:   # cases with a target: the metric against wall time, as text
            console.print(f"  {line}", markup=False, highlight=False, overflow="fold")
    if gate is not None:
        for line in gate_lines(gate):
            console.print(line, markup=False, highlight=False, style="red" if line.startswith("FAIL") else "")
    console.print(explain(comparisons), style="dim", highlight=False)


def markdown(comparisons, gate: dict | None = None) -> str:
    parts = [html_comment(), "# xpubench compare", ""]
    for c in comparisons:
        parts += [f"## {md_escape(_title(c))}", ""]
        if c.environment:
            parts += [f"**Warning: {differences_title(c.environment)}:**", "", md_bullets(c.environment), ""]
        if c.cases:
            parts += ["**Warning: the cases differ:**", "", md_bullets(c.cases), ""]
        for name, rows in grouped(c.rows):
            parts += [f"### {_group_title(name, rows)}", "", md_table(rows_frame(c, rows)), ""]
        parts += [md_escape(geometric_mean_line(c)), ""]
        if c.curves:
            parts += ["The metric against wall time (the median seed):", "", md_bullets(c.curves), ""]
    if gate is not None:
        parts += ["## Regression gate (--fail-on)", "", md_bullets(gate_lines(gate)), ""]
    parts += [f"_{md_escape(explain(comparisons))}_", ""]
    return "\n".join(parts)


def html_page(comparisons, gate: dict | None = None) -> str:
    body = []
    for c in comparisons:
        body.append(f"<h2>{html_out.esc(_title(c))}</h2>")
        body.append(html_out.warnings_html(c.environment, f"Warning: {differences_title(c.environment)}"))
        body.append(html_out.warnings_html(c.cases, "Warning: the cases differ"))
        for name, rows in grouped(c.rows):
            body.append(f"<h3>{html_out.esc(_group_title(name, rows))}</h3>")
            body.append(html_out.table_html(rows_frame(c, rows), text_columns=2))
        body.append(f"<p>{html_out.esc(geometric_mean_line(c))}</p>")
        if c.chart is not None:   # cases with a target: the metric against wall time (report/charts/target.py)
            body.append(html_out.image_html(c.chart.png, c.chart.title))
    if gate is not None:
        body.append(html_out.warnings_html(gate_lines(gate), "Regression gate (--fail-on)"))
    body.append(f'<p class="note">{html_out.esc(explain(comparisons))}</p>')
    return html_out.page("xpubench compare", "".join(body))
