"""A GGUF a user hands over (``serve --weights FILE.gguf``) or the cache holds (llama.cpp's cases) is read only
after its header was walked with every count and length bounded by the bytes left (issue 51 item 9;
backends/llamacpp_/gguf_header.py): a count of 2**60, a string or an array longer than the file, a tensor past
its end are one line and exit code 2, never a traceback, a hang or a memory blow-up. The file mutated here is
a real one the gguf package writes (a vocabulary, a float and a q8_0 tensor)."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import gguf
import pytest
from bad_input_doc import Case, check_row, run_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xpubench.backends.llamacpp_ import gguf_header
from xpubench.errors import UserError
from xpubench.serve.model import given_file


def small_gguf(path: Path) -> Path:
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(["<unk>", "<s>", "</s>", "a", "b"])
    w.add_token_scores([0.0, 0.0, 0.0, -1.0, -2.0])
    w.add_tensor("token_embd.weight", np.ones((5, 32), dtype=np.float32))
    q = gguf.GGMLQuantizationType.Q8_0
    w.add_tensor("output.weight", gguf.quants.quantize(np.ones((4, 64), dtype=np.float32), q), raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


GOOD = small_gguf(Path(__import__("tempfile").mkdtemp(prefix="xpubench-gguf-")) / "good.gguf")
DATA = GOOD.read_bytes()
READER = gguf.GGUFReader(str(GOOD))
HEADER_END = READER.data_offset
DATA_END = max(t.data_offset + int(t.n_bytes) for t in READER.tensors)   # the end of the last tensor's bytes


def value_at(key: str) -> int:
    """The byte where metadata ``key``'s value begins (after its key string and type)."""
    field = READER.fields[key]
    return field.offset + 8 + len(key.encode()) + 4


def mutated(folder: Path, name: str, *writes: tuple[int, str, int], size: int | None = None) -> Path:
    data = bytearray(DATA if size is None else DATA[:size])
    for at, fmt, value in writes:
        struct.pack_into("<" + fmt, data, at, value)
    path = folder / name
    path.write_bytes(bytes(data))
    return path


def test_the_real_file_reads_as_gguf_py_reads_it():
    reader = gguf_header.read(GOOD, "--weights")
    assert [t.name for t in reader.tensors] == ["token_embd.weight", "output.weight"]
    assert reader.data_offset == HEADER_END


def doc_cases(folder: Path) -> list[Case]:
    """docs/bad-input.md's GGUF rows: each file `serve --server llamacpp --weights` is handed."""
    tokens = value_at("tokenizer.ggml.tokens")
    files = {
        "a metadata count of 2**60": mutated(folder, "count.gguf", (16, "Q", 2**60)),
        "a tensor count of 2**60": mutated(folder, "tensors.gguf", (8, "Q", 2**60)),
        "a key longer than the file": mutated(folder, "key.gguf", (24, "Q", 2**40)),
        "a string value longer than the file": mutated(folder, "string.gguf",
                                                       (value_at("tokenizer.ggml.model"), "Q", 2**63)),
        "an array of 2**60 strings": mutated(folder, "array.gguf", (tokens + 4, "Q", 2**60)),
        "an unknown value type": mutated(folder, "type.gguf", (value_at("tokenizer.ggml.model") - 4, "I", 99)),
        "the file cut inside a tensor": mutated(folder, "cut.gguf", size=DATA_END - 1),
        "an empty file": mutated(folder, "empty.gguf", size=0),
    }
    says = {
        "a metadata count of 2**60": "a metadata count of 1,152,921,504,606,846,976 at byte 16: more than the",
        "a tensor count of 2**60": "a tensor count of 1,152,921,504,606,846,976 at byte 8: more than the",
        "a key longer than the file": "metadata key 0: a length of 1,099,511,627,776 at byte 24: more than the",
        "a string value longer than the file": "'tokenizer.ggml.model': a string length of 9,223,372,036,854,775,808",
        "an array of 2**60 strings": "'tokenizer.ggml.tokens': an array of 1,152,921,504,606,846,976",
        "an unknown value type": "'tokenizer.ggml.model': unknown value type 99",
        "the file cut inside a tensor": "run past the end of the file (1,327 bytes)",
        "an empty file": "not a GGUF file (it is empty)",
    }
    return [Case(name, f"xpubench serve --server llamacpp --weights {path} -o {folder}/s.jsonl", says[name])
            for name, path in files.items()]


@pytest.mark.parametrize("index", range(8))
def test_a_malformed_header_is_one_line_and_exit_2(index, tmp_path):
    case = doc_cases(tmp_path)[index]
    outcome = run_case(case)
    check_row(case, outcome)
    assert f"error: --weights {tmp_path}/" in outcome.err and not (tmp_path / "s.jsonl").exists()


def test_a_damaged_cached_file_is_one_line(tmp_path):
    from xpubench.backends.llamacpp_.gguf_file import tensor_summary

    with pytest.raises(UserError, match="the cached GGUF .*: more than the"):
        tensor_summary(mutated(tmp_path, "cached.gguf", (16, "Q", 2**60)))


def test_a_fifo_is_refused_before_a_byte_is_read(tmp_path):
    import os

    os.mkfifo(tmp_path / "fifo.gguf")
    with pytest.raises(UserError, match="is a FIFO"):
        given_file(tmp_path / "fifo.gguf")


WIDTHS = {"B": 0xFF, "I": 0xFFFFFFFF, "Q": 2**64 - 1}
VALUES = st.one_of(st.sampled_from([0, 1, 2, 3, 4, 9, 12, 31, 255, 2**31, 2**32 - 1, 2**40, 2**60, 2**63, 2**64 - 1,
                                    len(DATA), len(DATA) + 1]), st.integers(0, 2**64 - 1))
WRITE = st.tuples(st.integers(0, HEADER_END - 1), st.sampled_from(sorted(WIDTHS)), VALUES)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=st.lists(WRITE, min_size=1, max_size=3), cut=st.one_of(st.none(), st.integers(0, len(DATA))))
def test_any_mutated_header_is_read_or_one_line(writes, cut, tmp_path):
    """Counts, lengths and types overwritten anywhere in the header, the file cut anywhere: gguf-py's reader
    gets the file only when its header holds (then its tensors lie inside the file), anything else is one
    UserError line, quickly."""
    fits = [(at, fmt, v & WIDTHS[fmt]) for at, fmt, v in writes if at + struct.calcsize(fmt) <= len(DATA)]
    path = mutated(tmp_path, "m.gguf", *fits)
    if cut is not None:
        path.write_bytes(path.read_bytes()[:cut])
    started = time.monotonic()
    try:
        given_file(path)                              # what `serve --weights FILE.gguf` does with it
    except UserError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(f"--weights {path}")
    assert time.monotonic() - started < 5
