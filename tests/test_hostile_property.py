"""Property (hypothesis): whatever a results file holds, `xpubench.load`, `xpubench report` and
`xpubench compare` either succeed or end in one line on stderr and exit code 2, never a traceback.

The files are real records (tests/data/records/seed.jsonl) with one to three fields replaced by a value
of another kind (null, a string, 0, a negative or huge number, a list, an object) or deleted, and raw
bytes and JSON of any shape. Charts are built but not encoded as PNG (the property is about reading the
records, and encoding is most of a report's time), so the test takes a few seconds.
"""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from pathlib import Path

import pytest
import report_runs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xpubench import api, cli
from xpubench.errors import UserError

SEED = Path(__file__).parent / "data" / "records" / "seed.jsonl"
RECORDS = [json.loads(line) for line in SEED.read_text().splitlines()]
FAST = settings(max_examples=25, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _paths(value, prefix=()):
    """Every field of a record (lists: their first two items)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:2]):
            yield (*prefix, i)
            yield from _paths(v, (*prefix, i))


OTHER_KIND = st.one_of(
    st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, -1e-9, 1e-300, 1e300, 10 ** 400, "", "fast", "/../../x", "<script>", [], {}, [None],
                     ["1"], {"a": None}, "ok", "train", "matmul", "infer", "generate", "cpu", "gpu:0"]),
    st.text(max_size=6), st.lists(st.one_of(st.none(), st.floats(), st.text(max_size=3)), max_size=3))


@st.composite
def mutated_records(draw) -> str:
    records = [copy.deepcopy(RECORDS[i]) for i in draw(st.lists(st.integers(0, len(RECORDS) - 1), min_size=1,
                                                                  max_size=3))]
    for _ in range(draw(st.integers(1, 3))):
        record = draw(st.sampled_from(records))
        *parents, last = draw(st.sampled_from(sorted(_paths(record), key=str)))
        target = record
        for p in parents:
            target = target[p]
        if isinstance(target, dict) and draw(st.booleans()):
            target.pop(last, None)
        else:
            target[last] = draw(OTHER_KIND)
    return "".join(json.dumps(r) + "\n" for r in records)


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                        max_size=3), max_leaves=12)
RAW = st.one_of(
    st.binary(max_size=300),
    st.lists(JSON_VALUES, min_size=1, max_size=3).map(lambda vs: "".join(json.dumps(v) + "\n" for v in vs)),
    st.integers(1, 3000).map(lambda n: "{" + '"a": [' * n + "]" * n + "}\n"),
    st.tuples(st.sampled_from(RECORDS), st.integers(1, 400)).map(lambda t: json.dumps(t[0])[:t[1]]),
)


def _one_line_or_success(capsys, argv) -> None:
    capsys.readouterr()
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    errors = [line for line in err.splitlines() if line.strip() and not line.startswith("xpubench: warning:")]
    assert code in (0, 2), (code, errors)
    if code == 2:
        assert len(errors) == 1 and errors[0].startswith("xpubench: error: "), errors
    return out, err


def _load(path: Path) -> None:
    try:
        api.load(path)
    except UserError as exc:
        assert "\n" not in str(exc)


@pytest.fixture
def quick_charts(monkeypatch):
    report_runs.quick_charts(monkeypatch)


@pytest.mark.slow
@FAST
@given(text=mutated_records())
def test_hostile_records_are_read_or_refused_in_one_line(text, tmp_path, capsys, quick_charts):
    path = tmp_path / "hostile.jsonl"
    path.write_text(text)
    _load(path)
    _one_line_or_success(capsys, ["report", path, "-o", tmp_path / "report.md", "--force"])
    _one_line_or_success(capsys, ["compare", SEED, path])


# issue 31: text that a terminal, rich, Markdown or matplotlib would interpret, or that no stream can encode
HOSTILE_PIECES = st.sampled_from([
    "\x1b]0;pwned\x07", "\x1b[2J", "\x1b[31m", "\r", "\x00", "\x9b", "\u202e", "[/x]", "[/]", "[bold]",
    "[batch, features]", "\\", "$x^$", "$\\frac{", "$", "<script>", "|", "`", "*", "\ud800", "\udcff",
    "\udc80\udcfe", "±µ"])
HOSTILE_TEXT = st.lists(st.one_of(HOSTILE_PIECES, st.text(max_size=3)), min_size=1, max_size=4).map("".join)


def _string_fields(record) -> list[tuple]:
    found = []
    for path in _paths(record):
        target = record
        for p in path:
            target = target[p]
        if isinstance(target, str):
            found.append(path)
    return sorted(found, key=str)


@st.composite
def hostile_text_records(draw) -> tuple[str, bool]:
    """Real records with hostile text in one to three string fields (any of them: keys, names, messages,
    paths, warnings); sometimes a raw non-UTF-8 byte in the line as well (``True``: bytes to write)."""
    records = [copy.deepcopy(RECORDS[i]) for i in draw(st.lists(st.integers(0, len(RECORDS) - 1), min_size=1,
                                                                  max_size=3, unique=True))]
    for _ in range(draw(st.integers(1, 3))):
        record = draw(st.sampled_from(records))
        *parents, last = draw(st.sampled_from(_string_fields(record)))
        target = record
        for p in parents:
            target = target[p]
        target[last] = draw(HOSTILE_TEXT)
    return "".join(json.dumps(r) + "\n" for r in records), draw(st.booleans()) and draw(st.booleans())


@pytest.fixture
def drawn_charts(monkeypatch):
    """Charts laid out (every text measured, as a real draw does: math parsed, glyphs looked up) but not
    encoded as PNG."""
    from matplotlib.figure import Figure

    def savefig(self, fh, **kw):
        self.draw_without_rendering()
        fh.write(b"\x89PNG\r\n\x1a\n")

    monkeypatch.setattr(Figure, "savefig", savefig)


@pytest.mark.slow
@settings(max_examples=12, deadline=timedelta(seconds=30), database=None,   # a hang, on a busy 2-core CI box
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(drawn=hostile_text_records())
def test_hostile_text_in_any_field_is_printed_as_text_or_refused_in_one_line(drawn, tmp_path, capsys,
                                                                             drawn_charts):
    text, raw_byte = drawn
    path = tmp_path / "text.jsonl"
    data = text.encode()   # json.dumps writes a lone surrogate as \udcff, as xpubench itself does
    path.write_bytes(data.replace(b'"status": "', b'"status": "\xff', 1) if raw_byte else data)
    _load(path)
    for argv in (["report", path, "-o", tmp_path / "report.md", "--force"], ["compare", SEED, path]):
        out, err = _one_line_or_success(capsys, argv)
        assert "\x1b" not in out + err and "\x07" not in out + err   # no raw escape reaches the terminal
        (out + err).encode("utf-8")   # nor a lone surrogate
    if (tmp_path / "report.md").exists():
        report = (tmp_path / "report.md").read_text(encoding="utf-8")
        assert "\x1b" not in report and "\x07" not in report


@pytest.mark.slow
@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=RAW)
def test_any_bytes_are_read_or_refused_in_one_line(content, tmp_path, capsys):
    path = tmp_path / "any.jsonl"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    _load(path)
    _one_line_or_success(capsys, ["compare", path, SEED])
