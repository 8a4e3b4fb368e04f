"""Issue 52 items 2 and 7, read from recorded files (tests/data/runs, tests/data/llm; nothing here runs a model): every
framework's LLM row at its best or labelled ("torch (eager decode)") in the summary's column, the answer,
the report and compare; a brief 4-layer pp64/tg16 row never compared with, nor shown as, a full 30-layer
pp512/tg128 one (nor a depth-32 one); the LLM report: torch in "Backend against backend", the llama line
in "Which device for what", llama.cpp's n/a cells with their reason, and why llama.cpp's (and torch's)
figures are low where the machine was busy. The brief run's plan: tests/test_brief_run.py."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rendered_ratios import unescape_md
from report_runs import quick_charts
from rich.console import Console

from xpubench import analysis
from xpubench.case import Case
from xpubench.energy.meter import EnergyMeter, Unavailable
from xpubench.report.base.frame import ResultSet
from xpubench.report.compare import compare_files
from xpubench.report.compare_render import print_tables
from xpubench.report.render.terminal import print_run_output
from xpubench.report.sections import section

DATA = Path(__file__).parent / "data"
RUNS = DATA / "runs"
QUIET = RUNS / "default-zen3-quiet.jsonl"   # the brief run before issue 52: torch's eager decode, JAX's jitted one
LLAMA = DATA / "llm" / "llama-zen5.jsonl"    # brief (torch compiled, jax, llamacpp), brief at depth 32, full; busy
DEFAULT = DATA / "llm" / "default-zen5.jsonl"  # the brief default run after issue 52: torch's decode compiled; busy
BARRIERS = "meet at a barrier"              # the under-load note's words (the llamacpp and torch records')


def terminal(path: Path, width: int = 200) -> str:
    """What `xpubench run` prints after the cases of ``path``: the summary, its notes and the answer."""
    out = io.StringIO()
    print_run_output(analysis.load([path]), Console(file=out, width=width, color_system=None), None)
    return out.getvalue()


def report(path: Path, tmp_path: Path, monkeypatch) -> str:
    """The Markdown report of ``path`` (`xpubench report --format md`), its charts made but not drawn."""
    from xpubench.cli import main

    quick_charts(monkeypatch)
    out = tmp_path / f"{path.stem}.md"
    assert main(["report", str(path), "--format", "md", "-o", str(out)]) == 0
    return out.read_text()


def section_lines(md: str, title: str) -> list[str]:
    part = md.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in part.splitlines() if line.startswith(("- ", "| "))]


def test_torch_eager_decode_is_labelled_in_the_row_the_ratio_and_the_answer(tmp_path, monkeypatch):
    """The default run before issue 52 compared torch's eager decode with JAX's jitted one and said
    "jax 1.66x torch": every place that shows or compares that row now names the variant."""
    text = terminal(QUIET, width=2000)   # the answer's lines unfolded
    runtimes = text.split("Language models on cpu")[1].split("pp, tg: tokens/s")[0]
    assert re.search(r"fp32\s+torch \(eager decode\)\s", runtimes), runtimes
    [answer] = [line for line in text.splitlines() if line.startswith("- smollm-135m 4/30 layers, pp64/tg16: ")]
    assert re.match(r"- smollm-135m 4/30 layers, pp64/tg16: fastest jax cpu, [\d.]+x as fast as torch \(eager decode\) "
                    r"cpu \(decode [\d.]+ tok/s against [\d.]+ tok/s, \d+% against \d+% of the bandwidth bound", answer)
    md = report(QUIET, tmp_path, monkeypatch)
    pairs = [line for line in section_lines(md, "Backend against backend") if "4/30 layers" in line]
    assert len(pairs) == 1 and "| torch (eager decode) |" in pairs[0] and "| jax |" in pairs[0], pairs
    assert re.search(r"jax is [\d.]+x faster than torch \(eager decode\)", pairs[0])
    advice = [unescape_md(line) for line in section_lines(md, "Which device for what")]
    assert answer + "." in advice and not [line for line in advice if line.startswith("- llama generation")], advice
    llm = section_lines(md, "Language models: prompt processing and generation")
    assert [line for line in llm if line.startswith("| torch (eager decode) | tg16 |")], llm


def test_a_brief_row_a_deeper_one_and_a_full_one_are_never_compared_nor_one_row(tmp_path, monkeypatch):
    """The brief case (4 of 30 layers, pp64/tg16), the same at depth 32 and the full model (pp512/tg128) in
    one file: each has rows of its own, labelled, and every comparison stays inside one of them."""
    text = terminal(LLAMA, width=2000)   # the answer's lines unfolded
    summary = text.split("Answer:")[0]
    for model, test in (("smollm-135m", "pp512/tg128"), ("smollm-135m 4/30 layers", "pp64/tg16"),
                        ("smollm-135m 4/30 layers", "pp64/tg16 @ d32")):
        assert re.search(rf"^{re.escape(model)}\s+{re.escape(test)}\s+fp32\s", summary, re.MULTILINE), (test, summary)
    answer = [line for line in text.split("Answer:")[1].splitlines() if line.startswith(("- llama", "- smollm"))]
    brief = "- smollm-135m 4/30 layers, pp64/tg16"
    assert [line.split(": ")[0] for line in answer] == ["- smollm-135m, pp512/tg128", brief, f"{brief} @ d32"], answer
    assert not [line for line in answer if "different settings" in line]
    md = report(LLAMA, tmp_path, monkeypatch)
    pairs = section_lines(md, "Backend against backend")[1:]   # under the header
    cases = [line.split(" | ")[0].removeprefix("| ") for line in pairs]
    assert cases == ["generate fp32 batch 1"] * 3 + ["generate fp32 batch 1 (4/30 layers, pp64, tg16)"] * 3 + \
        ["generate fp32 batch 1 (4/30 layers, pp64, tg16, d32)"], pairs
    assert sum("| torch |" in line for line in pairs) == 4        # torch against jax and llamacpp, brief and full
    advice = [unescape_md(line) for line in section_lines(md, "Which device for what")
              if line.startswith(("- llama generation", "- smollm"))]
    assert advice == [line + "." for line in answer], advice   # the same lines on both screens


def test_the_llama_cpp_cells_that_are_na_say_why():
    """llama-bench reports no KV cache size, and no energy is read around what it times: "n/a" says so."""
    data = ResultSet.load(analysis.load([LLAMA]))
    [table] = section("llm").shown_tables(data, report=True)
    cells = table.frame()
    cpp = cells[cells["backend"] == "llamacpp"]
    assert set(cpp["KV cache"]) == {"n/a (llama-bench does not report it)"}
    assert set(cpp["J/token"]) == {"n/a (no CPU energy counter)"}        # the VM it was recorded on has none
    assert set(cells[cells["backend"] == "jax"]["KV cache"]) != {"n/a"}


class Readable(EnergyMeter):
    """A counter that can be read (none on the VMs these tests run on): 1 J per second of its clock."""

    source = "test"

    def _read(self):
        return {"package": float(self._clock())}


def test_a_runtime_that_times_itself_says_why_it_has_no_energy():
    from xpubench.harness.engine import self_timed_energy

    assert self_timed_energy(Unavailable("no CPU energy counter: none here")) == "n/a: no CPU energy counter: none here"
    assert "the engine times itself" in self_timed_energy(Readable())


def test_a_busy_run_says_why_llama_cpp_and_torch_figures_are_low():
    """llama-bench's tg at 18.4 and 279 tok/s in the two processes of one case on a busy 2-core VM: its
    spinning threads. The summary's notes and the LLM table say so, with how busy the machine was; a quiet
    run says nothing."""
    text = terminal(LLAMA, width=2000)
    notes = [line for line in text.split("Answer:")[0].splitlines() if BARRIERS in line]
    assert [line.split(" (")[0] for line in notes] == ["llamacpp", "torch"], notes
    assert "measured on a busy machine (other processes held up to 98% of the CPU when a run started" in notes[0]
    assert "llama-bench's --poll 50" in notes[0] and "OpenMP" in notes[1]
    data = ResultSet.load(analysis.load([LLAMA]))
    [table] = section("llm").shown_tables(data, report=True)
    assert table.note.count(BARRIERS) == 2
    assert BARRIERS not in terminal(QUIET)                                # load 1.4 on 2 cores, nothing busy
    [quiet] = section("llm").shown_tables(ResultSet.load(analysis.load([QUIET])), report=True)
    assert BARRIERS not in quiet.note


def test_the_default_runs_llm_row_is_torch_compiled_against_jax_and_its_note_names_it_alone():
    """The default run after issue 52: torch's llama row is its compiled decode, like JAX's jitted one, so
    neither is labelled; on a busy machine its note names that row, not torch's matmul or training rows."""
    text = terminal(DEFAULT, width=2000)
    header = next(line for line in text.splitlines() if "fastest" in line and "ratio" in line)
    assert header.split()[3:6] == ["numpy", "torch", "jax"], header
    # one torch process with two decode rounds: the ratio is not significant, and the answer says so
    assert re.search(r"- smollm-135m 4/30 layers, pp64/tg16: fastest jax cpu, ([\d.]+x as fast as|but) torch cpu "
                     r"(\(|is within noise)", text), text
    notes = [line for line in text.split("Answer:")[0].splitlines() if BARRIERS in line]
    assert [line.split(":")[0] for line in notes] == ["torch (smollm-135m 4/30 layers fp32)"], notes


def test_compare_labels_a_case_by_its_options_and_never_cuts_its_key():
    """The brief jax case matches across the two files by its key; its row says what the key's 4/64/16 are,
    and the terminal folds the key rather than cutting it."""
    [comparison] = compare_files(QUIET, LLAMA)
    [row] = [r for r in comparison.rows if r.key.startswith("llama/jax")]
    assert row.key == "llama/jax/cpu/generate/fp32/b1/4/64/16" and row.label == "4/30 layers, pp64, tg16"
    out = io.StringIO()
    print_tables([comparison], Console(file=out, width=100, color_system=None))
    first_column = "".join(line.split("│")[1] for line in out.getvalue().splitlines() if line.startswith("│"))
    assert re.sub(r"\s", "", first_column) == "llama/jax/cpu/generate/fp32/b1/4/64/16(4/30layers,pp64,tg16)", \
        out.getvalue()


def test_a_case_is_named_and_compared_by_its_options_less_its_backends_own():
    from xpubench.workloads import alike, options_text, with_identity

    def llama(backend: str = "torch", **options) -> Case:
        return with_identity(Case("llama", backend, "cpu", "generate", batch_size=1, options=options))

    brief = llama(n_layers=4, prompt_len=64, new_tokens=16, decode="eager")
    assert options_text(brief) == "4/30 layers, pp64, tg16"           # the decode step: the backend's label
    assert alike(brief) == alike(llama("jax", n_layers=4, prompt_len=64, new_tokens=16, decode="compiled"))
    full = llama(decode="compiled")
    assert options_text(full) == "" and alike(full) != alike(brief)
    deep = llama(preset="llama-1b", n_layers=4, depth=512, int4_group_size=64)
    assert options_text(deep) == "llama-1b, 4/16 layers, d512, int4 groups of 64"
