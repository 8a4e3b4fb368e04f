"""What `xpubench run` shows in the terminal: a progress bar while cases run, tables at the end."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from xpubench.report.generation import generation_headline, print_generation_tables
from xpubench.report.tables import (
    inference_table,
    matmul_table,
    scaling_rows,
    scaling_table,
    status_table,
    training_table,
)

STATUS_STYLE = {"ok": "green", "skipped": "dim", "oom": "yellow", "timeout": "yellow", "crash": "red",
                "error": "red"}


class RunProgress:
    """A rich progress bar fed by api.RunHooks; prints one line per finished case."""

    def __init__(self, console: Console, enabled: bool = True):
        self.console = console
        self.enabled = enabled
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=console, transient=True, disable=not enabled)
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

    def start(self, case, process: int) -> None:
        self.progress.update(self.task, description=f"{case.key} [{process + 1}/{self.processes}]")

    def result(self, run) -> None:
        style = STATUS_STYLE.get(run.status, "")
        detail = headline(run) if run.status == "ok" else run.message
        mark = f" [{run.process + 1}/{run.processes}]" if run.processes > 1 else ""
        self.console.print(f"[{style}]{run.status:>7}[/] {run.key}{mark}  {detail}", highlight=False)
        self.progress.advance(self.task)


def headline(result) -> str:
    m = result.metrics
    if result.case.get("mode") == "matmul":
        return f"warm {m['warm_flops_per_s'] / 1e9:,.1f} GFLOP/s, cold {m['cold_flops_per_s'] / 1e9:,.1f}"
    if result.case.get("mode") == "infer" and m.get("latency_s") is not None:
        name = m.get("metric_name") or "metric"
        value = m.get(name)
        shown = "" if value is None else f", {name} {value:.4f}"
        return f"{m['samples_per_s']:,.0f} samples/s, {m['latency_s'] * 1e3:,.2f} ms/batch{shown}"
    if result.case.get("mode") == "generate":
        return generation_headline(m)
    if "samples_per_s" in m:
        return f"{m['samples_per_s']:,.0f} samples/s"
    return ""


def print_run_tables(results, console: Console) -> None:
    ok = [r for r in results if r.status == "ok"]
    mm = [r for r in ok if r.case.get("mode") == "matmul"]
    train = [r for r in ok if r.case.get("mode") == "train" and r.case.get("workload") != "selftest"]
    infer = [r for r in ok if r.case.get("mode") == "infer"]
    if mm:
        console.print(matmul_table(mm))
    if train:
        console.print(training_table(train))
    if infer:
        console.print(inference_table(infer))
    print_generation_tables(results, console)
    parallel = scaling_rows(train + infer)
    if parallel:
        console.print(scaling_table(parallel))
    bad = [r for r in results if r.status != "ok"]
    if bad:
        console.print(status_table(bad))
    for r in ok:
        if r.metrics.get("process_disagreement"):
            note = next(w for w in r.metrics["warning"].split("; ") if w.startswith(("bimodal", "processes disagree")))
            console.print(f"[yellow]noisy:[/] {r.key}: {note}", highlight=False)
