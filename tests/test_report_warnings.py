"""A report prints the results and nothing else: no library's warning reaches the reader (pandas' "DataFrame is
highly fragmented" was printed under the report of tests/data/records, its source line and all)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from xpubench.cli import main

DATA = Path(__file__).parent / "data"
FOLDERS = sorted({p.parent for p in DATA.rglob("*.jsonl") if "\"schema_version\"" in p.read_text().split("\n", 1)[0]})


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_a_folder_reported_together_warns_nothing(folder, capsys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["report", *map(str, sorted(folder.glob("*.jsonl"))), "-o", "-", "--format", "md"]) == 0
    out, err = capsys.readouterr()
    assert out and not err
    assert not [f"{w.category.__name__}: {w.message}" for w in caught]
