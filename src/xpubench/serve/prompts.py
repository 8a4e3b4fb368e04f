"""Prompts of a fixed token length, made before a point's clock starts.

The text is random words drawn from a seed (``--prompts random``, the default: every prompt different,
so no server's prefix cache turns a prefill into a lookup) or windows of a local text file at seeded
offsets (``--prompts FILE``). Its length in tokens is the server's own count: the text is tokenised
with the server's ``POST /tokenize`` (llama.cpp, vLLM and SGLang have it) and cut to the first
``input_len`` tokens with ``POST /detokenize`` (each call within the set-up deadline and serve/bounded.py's
bounds). A server without them gets ``input_len`` words and the results say so, with why
(``length_note``); the input tokens recorded are always the usage field's ``prompt_tokens`` where the
server sends it (a chat template's tokens and a BOS token included).

Lengths come in pairs like InferenceX's ``1k/1k``, ``1k/8k``, ``8k/1k`` (``--lengths``), scaled down for a
small machine by ``--scale`` (``1k/1k --scale 1/16`` is 64 in, 64 out).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from xpubench import readfile
from xpubench.errors import UserError
from xpubench.serve import bounded

MAX_TEXT = 64 * readfile.MiB
MAX_CHARS_PER_TOKEN = 64    # a cut prompt longer than this per token is not the server's honest cut
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def length(text: str) -> int:
    """``512``, ``1k`` (1024), ``8k``; one line on anything else."""
    t = text.strip().lower()
    try:
        value = int(t[:-1]) * 1024 if t.endswith("k") else int(t)
    except ValueError:
        raise UserError(f"not a token length: {text!r} (a whole number, or 1k, 8k)") from None
    if value < 1:
        raise UserError(f"a token length must be at least 1, got {text!r}")
    return value


def lengths(pair: str, scale: float = 1.0) -> tuple[int, int]:
    """``"1k/8k"`` scaled -> (input tokens, output tokens), each at least 1."""
    first, sep, second = pair.partition("/")
    if not sep:
        raise UserError(f"--lengths {pair}: write input/output, e.g. 1k/1k")
    return max(1, round(length(first) * scale)), max(1, round(length(second) * scale))


def fraction(text: str) -> float:
    """``--scale``: ``0.25`` or ``1/16``, above 0."""
    try:
        num, _, den = text.partition("/")
        value = float(num) / float(den) if den else float(num)
    except (ValueError, ZeroDivisionError):
        raise UserError(f"--scale {text}: not a fraction (0.25 or 1/16)") from None
    if not 0 < value <= 64:
        raise UserError(f"--scale {text}: must be above 0 and at most 64")
    return value


def _words(rng: random.Random, n: int) -> str:
    return " ".join("".join(rng.choice(LETTERS) for _ in range(rng.randint(2, 8))) for _ in range(n))


@dataclass
class Prompts:
    """Makes prompt i of a point (the same seed, stream and i give the same text; ``stream``: the point's
    own, its case's key, so no two points of a sweep send the same text)."""

    url: str
    input_len: int
    seed: int = 0
    source: str = "random"        # or a text file's path
    model: str | None = None
    length_note: str = ""
    headers: dict[str, str] = field(default_factory=dict, repr=False)   # the credentials (cli/serve.py)
    stream: str = ""
    _text: list[str] | None = None

    def __post_init__(self) -> None:
        if self.source != "random":
            path = Path(self.source).expanduser()
            text = readfile.read_text(path, "--prompts text file", MAX_TEXT)
            self._text = text.split()
            if not self._text:
                raise UserError(f"--prompts {self.source}: the file holds no words")

    def _raw(self, i: int, words: int) -> str:
        rng = random.Random(f"{self.seed}:{self.stream}:{i}")
        if self._text is None:
            return _words(rng, words)
        start = rng.randrange(len(self._text))
        return " ".join(self._text[(start + k) % len(self._text)] for k in range(words))

    def make(self, first: int, count: int, timeout_s: float = 30.0) -> list[str]:
        """Prompts ``first`` .. ``first + count - 1``, each cut to ``input_len`` tokens by the server (each of
        its calls within ``timeout_s`` and serve/bounded.py's bounds)."""
        return asyncio.run(self._make(range(first, first + count), timeout_s))

    async def _make(self, numbers: range, timeout_s: float) -> list[str]:
        async with httpx.AsyncClient(timeout=timeout_s, headers=self.headers) as client:
            return [await self._cut(client, self._raw(i, self.input_len * 2 + 8), timeout_s) for i in numbers]

    async def _cut(self, client: httpx.AsyncClient, text: str, timeout_s: float) -> str:
        if not self.length_note:                   # else the server could not tokenise: words stand for tokens
            said = await bounded.call(client, "POST", f"{self.url}/tokenize", {
                "content": text, "prompt": text, "model": self.model, "add_special": False}, deadline_s=timeout_s)
            tokens = said.value.get("tokens") if isinstance(said.value, dict) else None
            if isinstance(tokens, list) and len(tokens) >= self.input_len:
                said = await bounded.call(client, "POST", f"{self.url}/detokenize", {
                    "tokens": tokens[: self.input_len], "model": self.model}, deadline_s=timeout_s)
                cut = said.value.get("content", said.value.get("prompt")) if isinstance(said.value, dict) else None
                if isinstance(cut, str) and cut.strip() and len(cut) <= MAX_CHARS_PER_TOKEN * self.input_len:
                    return cut
            why = said.error or (f"HTTP {said.status}" if said.status != 200 else "not a usable answer")
            self.length_note = (f"the server did not cut prompts to tokens with /tokenize and /detokenize ({why}): "
                                f"prompts of {self.input_len} words, input tokens from its usage field")
        return " ".join(text.split()[: self.input_len])
