"""Issue 21: the default run's "Efficiency, energy and cost" section, read from a recorded results file
(tests/data/runs/default-zen4.jsonl, the default run on the project's VM): no "% of peak" above the peak,
a ceiling figure for every row (the file's fastest matmul as a labelled lower bound), a reason shared by
every row said once under its table, and no local path anywhere."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd

from xpubench.analysis import analyse
from xpubench.plan.resolve import recorded_case
from xpubench.report.base.frame import ResultSet
from xpubench.report.render.build import build_section
from xpubench.report.sections import section
from xpubench.report.tables.costs import CEILING_AT_LEAST, efficiency_table, fold, shareable
from xpubench.results import store

RECORDED = Path(__file__).parent / "data" / "runs" / "default-zen4.jsonl"


def recorded_section(edit=None):
    loaded = store.load_file(RECORDED, recorded_case)
    if edit:
        edit(loaded)
    analyse(loaded.results)
    return build_section(section("efficiency"), ResultSet.load(loaded))


def section_text(sec) -> str:
    parts = [sec.intro]
    for block in sec.tables:
        parts += [block.title, block.frame.to_string(), block.note]
    return "\n".join(parts)


def test_the_default_runs_section_has_ceilings_and_says_each_shared_reason_once():
    sec = recorded_section()
    (block,) = sec.tables      # cost and energy: not one figure known, so a sentence and no table (issue 32)
    eff = block.frame
    text = section_text(sec)
    assert "above est. peak" not in text and "above spec peak" not in text
    # no ceiling measured in any row: the headers say "at least" / "at most" once, the cells are plain figures
    assert all(cell.endswith("FLOP/s") and "≥" not in cell for cell in eff[CEILING_AT_LEAST])
    assert all(cell.endswith("%") and "≤" not in cell for cell in eff["% of ceiling, at most"])
    assert "note" not in eff                        # every row's reason was the same: said once, below
    eff_note = block.note
    assert eff_note.count("No measured ceiling for") == 1 and "xpubench ceilings" in eff_note
    assert "the real % of ceiling is at most the one shown" in eff_note
    (money,) = sec.bullets
    assert "no CPU energy counter" in money and money.count("no CPU energy counter") == 1
    assert "no price given" in money and "samples/s" not in money
    assert "/root" not in text and "~/" not in text and "/home/" not in text


def test_a_table_with_a_measured_and_a_bound_ceiling_marks_the_bound():
    loaded = store.load_file(RECORDED, recorded_case)
    analyse(loaded.results)
    frame = ResultSet.load(loaded).frame
    frame.loc[frame["backend"] == "jax", "ceiling_is_lower_bound"] = None   # as if jax's had been measured
    eff = efficiency_table(frame).frame()
    assert "measured ceiling" in eff and CEILING_AT_LEAST not in eff
    marked = eff["measured ceiling"].str.startswith("≥ ")
    assert marked.any() and not marked.all() and "≥ and ≤" in efficiency_table(frame).note


def test_an_older_file_with_a_local_path_in_its_note_shows_no_path():
    """Files recorded before issue 21 carry the cache's path in their ceilings note."""
    def old_note(loaded):
        for result in loaded.results:
            fp = result.fingerprint = copy.deepcopy(result.fingerprint)
            fp["ceilings"]["note"] = ("no measured ceiling for numpy/cpu/fp32 (no cache file at "
                                      "/root/.cache/xpubench/ceilings.json): run `xpubench ceilings`")
            result.metrics.pop("efficiency_note", None)
        from xpubench.analysis.ceilings import annotate

        annotate(loaded.results)

    text = section_text(recorded_section(old_note))
    assert "/root" not in text and "(a local path)" in text


def test_fold_lifts_shared_clauses_keeps_a_rows_own_and_drops_all_na_columns():
    table = pd.DataFrame({"case": ["a", "b"], "$": ["n/a", "n/a"], "x": ["1", "n/a"],
                          "note": ["shared reason; only a's", "shared reason"]})
    folded, said = fold(table, "note", {"$": "no price given"})
    assert list(folded.columns) == ["case", "x", "note"] and list(folded["note"]) == ["only a's", ""]
    assert said == ["shared reason", "$: n/a for every result (no price given), so left out"]
    assert shareable("cache at ~/.cache/x.json and /home/ann/r.jsonl, not /sys/class/powercap") == (
        "cache at (a local path) and (a local path), not /sys/class/powercap")
