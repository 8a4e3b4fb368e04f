"""What `xpubench compare` does: compare, print or write in the asked format, and with ``--fail-on`` gate
(report/compare_gate.py): exit 1 when a case got slower beyond its threshold and its processes separate.

``-o -`` (or no ``-o``) prints to stdout; then stdout holds the comparison only (warnings and the gate's
lines go to stderr), so ``--format json`` or ``csv`` is read by a script as it is.
"""

from __future__ import annotations

import io
import sys

from xpubench.report.compare import MIN_CHANGE, compare_files, render

EXIT_REGRESSION = 1


def run_compare_command(files, *, fmt: str = "table", output: str | None = None, console=None,
                        min_change: float = MIN_CHANGE, force: bool = False, fail_on: str | None = None) -> int:
    """Compare, then print or write (never over results or a file xpubench did not write, unless ``force``:
    report/base/outputs.py); returns the exit code: 0, or EXIT_REGRESSION when ``fail_on`` finds a regression."""
    from xpubench.legible.plaintext import PlainConsole as Console
    from xpubench.legible.plaintext import shown
    from xpubench.report import compare_render
    from xpubench.report.base.outputs import check_output
    from xpubench.report.compare_gate import gate_lines, gate_summary, parse_fail_on
    from xpubench.results.store import write_atomically

    thresholds = parse_fail_on(fail_on) if fail_on is not None else None
    if thresholds is not None:
        min_change = min(min_change, thresholds.smallest)   # a 3% threshold needs 3% changes called
    to_stdout = output in (None, "-")
    if not to_stdout:
        check_output(output, files, force=force, what="the comparison")

    def warn(line: str) -> None:  # stderr: a --format json on stdout stays valid JSON
        print(f"xpubench: warning: {shown(line)}", file=sys.stderr, flush=True)

    comparisons = compare_files(*files, min_change=min_change, on_warning=warn)
    gate = gate_summary(comparisons, thresholds) if thresholds is not None else None
    if fmt == "table" and not to_stdout:
        buf = io.StringIO()
        compare_render.print_tables(comparisons, Console(file=buf, width=200, color_system=None), to_file=True,
                                    gate=gate)
        write_atomically(output, buf.getvalue().encode("utf-8"))
    elif fmt == "table":
        render(comparisons, "table", console or Console(), gate=gate)
    else:
        text = render(comparisons, fmt, gate=gate)
        if to_stdout:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            sys.stdout.flush()
        else:
            write_atomically(output, text.encode("utf-8"))
    if not to_stdout and console is not None:
        console.print(f"comparison written to {output}", markup=False, highlight=False)
    if gate is None:
        return 0
    if fmt != "table" or not to_stdout:   # a terminal table shows the gate itself; else it goes to stderr
        for line in gate_lines(gate):
            print(f"xpubench: {shown(line)}", file=sys.stderr, flush=True)
    return 0 if gate["passed"] else EXIT_REGRESSION
