"""What `xpubench run` shows in the terminal: a progress bar while cases run; at the end a compact
summary, the sections marked ``always`` (time to target), the full tables (with --verbose) and the
answer."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from xpubench.report.base.figures import line
from xpubench.report.base.frame import ResultSet
from xpubench.report.base.table import print_table
from xpubench.report.sections import SECTIONS
from xpubench.report.tables.llm import runtime_table
from xpubench.report.tables.summary import ceiling_note, paid_tables, summary_table
from xpubench.report.tables.target import process_headline
from xpubench.results.modes import mode_of
from xpubench.results.plaintext import markup
from xpubench.units import fmt_rate

STATUS_STYLE = {"ok": "green", "skipped": "dim", "oom": "yellow", "timeout": "yellow", "crash": "red",
                "error": "red"}


class BudgetLeftColumn(ProgressColumn):
    """The run budget's time left ("112 s of 150 s left"), read at every refresh; empty without a budget."""

    def __init__(self):
        super().__init__()
        self.budget = None

    def render(self, task) -> Text:
        if self.budget is None:
            return Text("")
        return Text(f"{self.budget.left():.0f} s of {self.budget.total_s:g} s left", style="cyan")


class RunProgress:
    """A rich progress bar fed by api.RunHooks; prints one line per finished case."""

    def __init__(self, console: Console, enabled: bool = True):
        self.console = console
        self.enabled = enabled
        self.left_column = BudgetLeftColumn()
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), self.left_column, console=console, transient=True,
                                 disable=not enabled)
        self.task = None
        self.processes = 1

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def plan(self, cases, processes: int, left: int) -> None:
        total = len(cases) * processes
        if left < total:
            self.console.print(f"resuming: {total - left} of {total} worker processes already done or not needed "
                               f"({len(cases)} cases x {processes} processes)")
        self.processes = processes
        self.task = self.progress.add_task("starting", total=left)

    def budget(self, budget) -> None:
        """The run's launch.budget.Budget: its time left is shown beside the bar."""
        self.left_column.budget = budget

    def cut(self, case, process: int) -> None:
        """A process the budget left out: it counts as done, silently."""
        self.progress.advance(self.task)

    def start(self, case, process: int) -> None:
        self.progress.update(self.task, description=f"{markup(case.key)} [{process + 1}/{self.processes}]")

    def result(self, run) -> None:
        style = STATUS_STYLE.get(run.status, "")
        detail = headline(run) if run.status == "ok" else run.message
        mark = f" [{run.process + 1}/{run.processes}]" if run.processes > 1 else ""
        self.console.print(f"[{style}]{markup(f'{run.status:>7}')}[/] {markup(run.key)}{mark}  {markup(detail)}",
                           highlight=False, overflow="fold")
        self.progress.advance(self.task)


def headline(result) -> str:
    """The figures a finished case prints beside its status: its mode's headline and details
    (results/modes.py), "" for a mode nobody declared; a process of a case with a quality target: its
    seed and time to target, or why it fell short (report/tables/target.py)."""
    if result.metrics.get("target"):
        return process_headline(result)
    if result.mode == "generate" and result.metrics.get("prefill_tokens_per_s"):
        return generation_line(result.metrics)
    mode = mode_of(result.mode)
    return line(mode, result.metrics) if mode else ""


def _ms(seconds) -> str:
    return f"{seconds * 1e3:,.2f} ms" if seconds else "n/a"


def generation_line(m) -> str:
    """A generation process as llama-bench names its tests, each rate beside the time it comes from and
    that time's statistic: "pp64 3,702 tok/s (median prefill 17.29 ms), tg16 31.5 tok/s (median round's mean
    step 31.75 ms; median single step 7.27 ms)" (tg tok/s = batch / that step, as the summary derives it)."""
    batch, tg = m.get("batch"), m.get("decode_tokens_per_s")
    pp = (f"pp{m.get('prompt_len', '?')} {fmt_rate(m.get('prefill_tokens_per_s'))} tok/s "
          f"(median prefill {_ms(m.get('ttft_s'))})")
    return (f"{pp}, tg{m.get('new_tokens', '?')} {fmt_rate(tg)} tok/s (median round's mean step "
            f"{_ms(m.get('decode_token_s'))}; median single step {_ms(m.get('decode_token_p50_s'))})"
            + (f", batch {batch}" if batch is not None and batch > 1 else ""))


def print_run_tables(results, console: Console, *, verbose: bool = True) -> None:
    """The sections report/sections.py marks for the terminal, in its order: every ``terminal`` one and
    then the noisy figures with ``verbose`` (`xpubench run --verbose`), else only those marked ``always``
    (printed after the summary of every run: time to target)."""
    data = ResultSet.load(results)
    if data.frame.empty:
        return
    for section in SECTIONS:
        if section.always or (verbose and section.terminal):
            for table in section.shown_tables(data, report=False):
                print_table(table, console)
            for text in section.text(data):   # what its charts show, as text
                console.print(text, markup=False, highlight=False, overflow="fold")
    if verbose:
        _print_noisy(data, console)


def print_summary(results, console: Console) -> None:
    """The compact summary (report/tables/summary.py), fitting the console's width, what its figures cost
    (the compile each process paid, the dollars at the price given: ``paid_tables``), and under them the
    ceilings the run had no measured figure for, once, with the command that measures them."""
    data = ResultSet.load(results)
    if not data.frame.empty:
        summary, runtimes = summary_table(data.frame, data), runtime_table(data.frame)   # a language model's: llm.py
        for table in [summary] * (not summary.empty or runtimes.empty) + [runtimes] * (not runtimes.empty):
            print_table(table, console)
        for table in paid_tables(data.frame):
            print_table(table, console)
        note = ceiling_note(data)
        if note:
            console.print(note, highlight=False, overflow="fold")


def _print_noisy(data: ResultSet, console: Console) -> None:
    frame = data.frame
    if "process_disagreement" not in frame:
        return
    for _, r in frame[frame["process_disagreement"].notna()].iterrows():
        note = next((w for w in str(r.get("warning") or "").split("; ")
                     if w.startswith(("bimodal", "processes disagree"))), str(r["process_disagreement"]))
        console.print(f"noisy: {r['key']}: {note}", markup=False, highlight=False, overflow="fold")


def print_run_output(results, console: Console, output, *, verbose: bool = False) -> None:
    """All `xpubench run` prints after its cases: the summary, the sections marked ``always`` (every
    terminal section with ``verbose``), then the answer (report/sentences/answer.py) with where the results are and
    how to make the report."""
    from xpubench.report.sentences.answer import answer_lines

    print_summary(results, console)
    print_run_tables(results, console, verbose=verbose)   # without --verbose: the ``always`` sections
    for text in answer_lines(ResultSet.load(results), output):
        console.print(text, markup=False, highlight=False, overflow="fold")
