"""The GGUF that ``xpubench serve --server llamacpp`` serves: a file given (``--weights FILE.gguf``), or one
written here from a named shape with random weights (``--model smollm-135m --format q8_0``) or from a
checkpoint folder's weights (``--weights DIR``).

A served model must turn text into tokens and back, so the files written here carry a vocabulary, which
the llama.cpp benchmark GGUFs do not (``no_vocab``: llama-bench feeds token ids, and llama-server aborts on
text with such a file). It is a synthetic SentencePiece vocabulary of the shape's size (``vocabulary``):
``<unk>``, ``<s>``, ``</s>``, the 256 byte tokens, then letters, letter pairs, triples ... with and without
the word-start mark. The serving speed depends on the token counts, not on which tokens they are; the
prompts' lengths are counted by the server's own tokenizer (prompts.py), so they are exact. A checkpoint
folder's own tokenizer is not converted (its weights are served with this vocabulary; said in ``model``).

Files are cached under ``<cache>/gguf/`` by a digest of (writer, shape, seed or checkpoint, format), like
the benchmark GGUFs (backends/llamacpp_/gguf_file.py, whose writer and quantiser this uses).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import string
from dataclasses import dataclass
from pathlib import Path

from xpubench.backends.llamacpp_.gguf_file import FORMATS
from xpubench.errors import UserError

VOCAB_VERSION = 1
AS_IN_THE_FILE = "as in the file"   # the format of a GGUF file served as it is
WORD_START = "\u2581"    # SentencePiece's word-start mark (a space before the piece)


@dataclass(frozen=True)
class Served:
    """What the server will load: the file, how it was made, and the label results carry."""

    path: Path
    label: str          # the model's name in results (the shape and format, or the file's name)
    weight_format: str  # llama.cpp's type name (q8_0) or AS_IN_THE_FILE
    origin: str         # "random weights of smollm-135m's shape (seed 0), synthetic vocabulary", ...


def pieces(size: int) -> list[str]:
    """The synthetic vocabulary's normal pieces, most preferred first (module docstring)."""
    letters = string.ascii_lowercase
    out = [WORD_START, *(c for c in string.printable[:94])]
    out += [WORD_START + c for c in string.ascii_letters + string.digits]
    n = 2
    while len(out) < size:
        for combo in itertools.product(letters, repeat=n):
            word = "".join(combo)
            out += [word, WORD_START + word]
            if len(out) >= size:
                break
        n += 1
    return out[:size]


def vocabulary(size: int):
    """A writer callback (gguf_file.write_gguf's ``vocabulary``) adding the synthetic SentencePiece
    vocabulary of ``size`` tokens (at least 512)."""
    if size < 512:
        raise UserError(f"a served model needs a vocabulary of at least 512 tokens, this shape has {size}")

    def write(w) -> None:
        import gguf

        special = ["<unk>", "<s>", "</s>"]
        byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
        normal = pieces(size - len(special) - len(byte_tokens))
        tokens = special + byte_tokens + normal
        types = ([gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
                 + [gguf.TokenType.BYTE] * 256 + [gguf.TokenType.NORMAL] * len(normal))
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores([0.0] * (len(special) + 256) + [-float(i) for i in range(len(normal))])
        w.add_token_types(types)
        w.add_unk_token_id(0)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_add_bos_token(True)
        w.add_add_space_prefix(True)
    return write


def _cache(environ=os.environ) -> Path:
    from xpubench.backends.llamacpp_.gguf_file import cache_dir

    folder = cache_dir(environ)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def written(cfg, fmt: str, *, seed: int = 0, weights: str | None = None, threads: int = 1,
            environ=os.environ) -> Served:
    """The GGUF of ``cfg`` (a LlamaConfig) in ``fmt`` (a FORMATS key) with a vocabulary, written (and
    quantised by llama-quantize) unless cached: random weights from ``seed``, or ``weights``' tensors."""
    from xpubench.backends.llamacpp_.binaries import find
    from xpubench.backends.llamacpp_.gguf_file import GGUF_TYPES, quantize, write_gguf

    if fmt.lower() not in FORMATS:
        raise UserError(f"--format {fmt}: choose from {', '.join(FORMATS)}")
    key = FORMATS[fmt.lower()]
    gguf_type, direct = GGUF_TYPES[key]
    shape = {k: v for k, v in cfg.__dict__.items() if k != "name"}
    source = ({"checkpoint": str(weights), "files": sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns)
                                                          for p in Path(weights).iterdir() if p.is_file())}
              if weights else {"seed": seed})
    identity = json.dumps({"vocab": VOCAB_VERSION, "config": shape, **source}, sort_keys=True, default=str)
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    origin = (f"the weights of {weights}" if weights else f"random weights of {cfg.name}'s shape (seed {seed})") \
        + f", {gguf_type}, xpubench's synthetic vocabulary of {cfg.vocab_size:,} tokens"
    out = _cache(environ) / f"served-{digest}-{gguf_type.lower()}.gguf"
    if not out.is_file():
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        try:
            if direct:                     # F32, BF16, F16: written as they are
                from xpubench.workloads.llama.checkpoint import open_checkpoint, random_hf_tensors
                from xpubench.workloads.llama.config import to_hf_config

                tensors = (((n, t.float().numpy()) for n, t in open_checkpoint(weights).tensors("pt")) if weights
                           else random_hf_tensors(cfg, seed).items())
                write_gguf(tmp, to_hf_config(cfg), key, tensors, vocabulary=vocabulary(cfg.vocab_size), name=cfg.name)
            else:                          # q8_0, q4_0, q4_K_M: llama-quantize makes them from the F32 file
                f32 = written(cfg, "f32", seed=seed, weights=weights, threads=threads, environ=environ).path
                quantize(find().quantize, f32, tmp, gguf_type, threads)
            os.replace(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)
    return Served(out, *served_as(cfg.name, fmt), origin)


def served_as(name: str, fmt: str) -> tuple[str, str]:
    """(the label results carry, the weights' format) of the named shape ``name`` written in ``fmt`` (a
    FORMATS key): ("smollm-135m-q8_0", "q8_0") for smollm-135m in int8."""
    from xpubench.backends.llamacpp_.gguf_file import GGUF_TYPES

    if fmt.lower() not in FORMATS:
        raise UserError(f"--format {fmt}: choose from {', '.join(FORMATS)}")
    kind = GGUF_TYPES[FORMATS[fmt.lower()]][0].lower()
    return f"{name}-{kind}", kind


def given_file(path: Path) -> Served:
    """A GGUF the user gave: refused (one line) when it is not a GGUF (its header checked before it is read:
    backends/llamacpp_/gguf_header.py) or has no vocabulary to serve text."""
    from xpubench.backends.llamacpp_ import gguf_header

    reader = gguf_header.read(path, "--weights")
    field = reader.fields.get("tokenizer.ggml.model")
    model = bytes(field.parts[-1]).decode("utf-8", "replace") if field is not None else None
    if model in (None, "no_vocab", "none"):
        raise UserError(f"--weights {path}: the GGUF has no vocabulary (tokenizer {model}): a server cannot "
                        "tokenise text with it")
    return Served(path, path.stem, file_type(reader), f"the GGUF {path}")


def file_type(reader) -> str:
    """A GGUF's format as llama.cpp names it (``q8_0``, ``f32``, ``q4_k_m``: its ``general.file_type``, as
    llama-server's /props says it), or AS_IN_THE_FILE where the header does not say."""
    import gguf

    field = reader.fields.get("general.file_type")
    try:
        kind = gguf.LlamaFileType(int(field.parts[-1][0])).name if field is not None else None
    except (ValueError, IndexError, TypeError):
        kind = None
    return kind.removeprefix("MOSTLY_").removeprefix("ALL_").lower() if kind and kind != "GUESSED" else AS_IN_THE_FILE


def resolve(weights: str | None, model: str | None, fmt: str, seed: int, threads: int) -> Served:
    """``--weights`` (a GGUF file or a checkpoint folder) or ``--model`` (a named shape, random weights)."""
    from xpubench.workloads.llama.config import preset

    if weights:
        path = Path(weights).expanduser()
        if path.is_file():
            return given_file(path)
        if not path.is_dir():
            raise UserError(f"--weights {weights}: no such file or folder")
        from xpubench.workloads.llama.checkpoint import open_checkpoint

        return written(open_checkpoint(path).config, fmt, weights=str(path.resolve()), threads=threads)
    return written(preset(model or "smollm-135m"), fmt, seed=seed, threads=threads)
