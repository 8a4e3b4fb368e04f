"""One question, one answer: the answer at the end of `xpubench run` and the report's "which device for what"
(the Markdown and HTML report, the site's pages and a notebook's report show its bullets) name each language
model's group (workload, model, test) in exactly one line, the same line on both screens, and that line
carries both the verdict and the runtimes' shares of the bandwidth bound. Read from every recorded results
file under tests/data. Before, each group had two lines: the per-workload verdict and the runtimes' line
(report/sentences/language_models.py)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from xpubench import analysis
from xpubench.legible.units import fmt_rate
from xpubench.report.base.frame import ResultSet
from xpubench.report.render.terminal import print_run_output
from xpubench.report.sections import section

DATA = Path(__file__).parent / "data"
FILES = sorted(p for p in DATA.glob("*/*.jsonl")   # the recorded files with a language model's generation
               if p.parent.name != "llamacpp" and "decode_bytes_per_token" in p.read_text())   # llamacpp/: its own
VERDICT = re.compile(r"no clear winner|\d\.\d\dx as fast as|the only runtime measured|no interval")
GROUP = ["workload", "architecture", "prompt_len", "new_tokens", "depth"]


def groups(frame: pd.DataFrame) -> dict[tuple, str]:
    """Each language model's group (its generation results that count the bytes a token reads) and its
    fastest decode figure as printed ("136 tok/s")."""
    if "decode_bytes_per_token" not in frame:
        return {}
    rows = frame[(frame["status"] == "ok") & frame["decode_bytes_per_token"].notna()]
    rows = rows.assign(depth=rows.get("depth"))
    return {key: f"{fmt_rate(part['decode_tokens_per_s'].max())} tok/s"
            for key, part in rows.groupby(GROUP, dropna=False)}


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
def test_each_language_model_group_is_answered_once_with_its_verdict_and_its_bound(path):
    loaded = analysis.load([path])
    data = ResultSet.load(loaded)
    named = groups(data.frame)
    assert named and len(set(named.values())) == len(named), named   # each group's figure names it alone
    out = io.StringIO()
    print_run_output(loaded, Console(file=out, width=400, color_system=None), "results.jsonl")
    text = out.getvalue()
    terminal = [line.removeprefix("- ") for line in text.split("\nAnswer:\n")[1].splitlines()]
    report = section("advice").bullets(data)
    for group, figure in named.items():
        said = [line for line in terminal if re.search(rf"(?<![\d.,]){re.escape(figure)}", line)]
        assert len(said) == 1, (group, figure, said)
        assert VERDICT.search(said[0]) and "of the bandwidth bound" in said[0], said[0]
        bullets = [b for b in report if re.search(rf"(?<![\d.,]){re.escape(figure)}", b)]
        assert bullets == [said[0] + "."], (group, bullets, said)
