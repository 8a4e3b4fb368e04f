"""Every CSV xpubench writes (`run`/`report -o - --format csv`, `compare --format csv`, the site's tables)
goes through ``csv_text``, so each is safe to open in a spreadsheet and exact to read back:

- a text cell that a spreadsheet would take for a formula (it starts with ``=``, ``+``, ``-``, ``@``, a tab
  or a carriage return) gets a leading ``'`` (OWASP's advice on CSV injection); a number is a number;
- numbers are written as Python holds them: a whole number as a whole number, however large (``256``,
  ``9007199254740993``), never through a float column (``256.0``); a float as its shortest round-trip text;
- None is an empty cell; quoting is the csv module's (``"a,b"``, ``""`` for a quote).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """``value`` as the csv module should write it (see the module)."""
    if isinstance(value, str) and value.startswith(FORMULA):
        return "'" + value
    return value


def csv_text(head: Sequence[str], rows: Iterable[Sequence]) -> str:
    """A header line and one line per row ("\\n" line ends)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([csv_cell(h) for h in head])
    writer.writerows([csv_cell(v) for v in row] for row in rows)
    return buf.getvalue()
