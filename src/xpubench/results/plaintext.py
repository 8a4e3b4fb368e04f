"""Text xpubench did not write itself (case keys, exception messages, paths, env-file fields, warnings and
device names read from results files) shown as plain text, at the points it is printed.

- ``shown(value)``: control characters (C0 but tab and newline, DEL, C1), lone surrogates and every
  format character (Unicode's category Cf: the bidirectional overrides, isolates and marks, zero-width
  spaces and joiners, the soft hyphen, the BOM) are written as Python escapes (``\\x1b``, ``\\udcff``,
  ``\\u202e``, ``\\u200b``): an ``ESC ]0;...BEL`` from a results file never reaches the terminal, a report
  or the site raw, a lone surrogate can be encoded by any stream, and two names that differ only by an
  invisible character never look the same.
- ``markup(value)``: ``shown`` and rich's markup escape, for a value put inside a markup string
  (``f"[yellow]warning:[/] {markup(w)}"``): ``[/x]`` is never a closing tag, ``[batch, features]`` is kept.
- ``plain_streams()``: stdout and stderr never fail on a character they cannot encode (``LC_ALL=C``,
  ``PYTHONUTF8=0``: an ASCII terminal): "±" is written "+-", "µs" "us", "×" "x", any other such character
  as its Python escape (``\xe9``); on a UTF-8 stream only a lone surrogate is escaped that way.
- ``PlainConsole``: the commands' rich Console. Every string it renders (a ``print`` argument, a table cell
  or title) goes through ``shown``; a string whose markup rich refuses is printed as it is, never a
  ``MarkupError`` traceback.
"""

from __future__ import annotations

import codecs
import re
import sys
from typing import Any

from rich.console import Console
from rich.errors import MarkupError
from rich.markup import escape

_FORMAT = ("\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
           "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
           "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f")   # Unicode's Cf
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff{_FORMAT}]")


def shown(value: Any) -> str:
    """``str(value)`` with every control character, lone surrogate and format character escaped."""
    return _UNSAFE.sub(lambda m: ascii(m.group())[1:-1], str(value))


def one_line(value: Any) -> str:
    """``shown(value)`` with newlines and tabs escaped too: a name read from a file (a shard, a tensor) inside
    a one-line message."""
    return shown(value).replace("\n", "\\n").replace("\t", "\\t")


def markup(value: Any) -> str:
    """``value`` as rich markup that renders as exactly ``shown(value)``."""
    return escape(shown(value))


ASCII = {"±": "+-", "µ": "u", "μ": "u", "×": "x", "²": "^2", "³": "^3", "—": "-", "–": "-", "…": "...",
         "≥": ">=", "≤": "<=", "→": "->", "←": "<-", "≈": "~", "·": ".", "°": " deg", "’": "'", "‘": "'",
         "“": '"', "”": '"', "\u00a0": " "}


def _ascii_fallback(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start:exc.end]
    return "".join(ASCII.get(ch) or ascii(ch)[1:-1] for ch in bad), exc.end


codecs.register_error("xpubench-plain", _ascii_fallback)


def plain_streams() -> None:
    """stdout and stderr write what they cannot encode as ASCII look-alikes or escapes (see the module)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="xpubench-plain")
            except (ValueError, OSError):   # a stream that cannot be reconfigured (closed, detached)
                pass


class PlainConsole(Console):
    """A rich Console that never writes a control character it was given as text (see the module)."""

    def render_str(self, text: str, **kwargs):
        text = shown(text)
        try:
            return super().render_str(text, **kwargs)
        except MarkupError:   # a string that was not meant as markup; printed as it is
            return super().render_str(text, **{**kwargs, "markup": False})
