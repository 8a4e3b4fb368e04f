"""The planner decides; nothing after the JSON line decides again (issue 53 item 1). A loaded result holds a
typed ``Case`` (an older line migrated once, results/schema.py), so a reader of a case's field reads it as
resolved: no ``row.get("devices") or 1``, ``num(row, "batch_size") or 1``, ``case.epochs or spec.epochs``
in the packages that read results."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import xpubench
from xpubench.case import Case

SRC = Path(xpubench.__file__).resolve().parent   # the sources imported (PYTHONPATH=OLD/src scans OLD)
READERS = ("report", "publish", "analysis", "results/fold.py")   # what reads a loaded result
FIELDS = frozenset(f.name for f in dataclasses.fields(Case))


def _field_read(node: ast.AST) -> str | None:
    """The case field ``node`` reads, if it reads one: ``x.get("f")``, ``x["f"]``, ``num(x, "f")``,
    ``getattr(x, "f")``, ``x.f`` (``int(...)``, ``float(...)`` and ``pd.to_numeric(...)`` around it too)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("int", "float", "str"):
        return _field_read(node.args[0]) if node.args else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to_numeric":
        return _field_read(node.args[0]) if node.args else None
    name = None
    if isinstance(node, ast.Call) and node.args:
        called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        which = node.args[0] if called == "get" else node.args[1] if called in ("num", "getattr") and \
            len(node.args) > 1 else None
        name = which.value if isinstance(which, ast.Constant) else None
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        name = node.slice.value
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("case", "c"):
        name = node.attr
    return name if name in FIELDS else None


def _a_default(node: ast.AST) -> bool:
    """A value decided here: a literal (``1``, ``0``, ``[1]``, ``"synthetic"``) or a workload spec's (``spec.x``);
    not how an unknown value is shown (``"n/a"``) nor "nothing" (``[]``, ``""``, ``None``)."""
    if isinstance(node, ast.Constant):
        return node.value not in (None, "", "n/a")
    if isinstance(node, (ast.List, ast.Tuple)):
        return bool(node.elts)
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "spec"


def redecided(path: Path, root: Path = SRC) -> list[str]:
    """``file:line: text`` of every ``<a case field> or <a default>`` (or ``.get(field, <a default>)``, or a
    column's ``frame["field"].fillna(<a default>)``) in ``path``, in line order."""
    tree = ast.parse(path.read_text(), str(path))
    lines = path.read_text().splitlines()
    found = set()
    for node in ast.walk(tree):
        pairs = []
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):   # case.get("devices") or 1
            pairs = list(zip(node.values, node.values[1:]))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and len(node.args) == 2:                                      # case.get("precision", "fp32")
            pairs = [(ast.Call(node.func, node.args[:1], []), node.args[1])]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "fillna" \
                and len(node.args) == 1:                                      # rows["batch_size"].fillna(1)
            pairs = [(node.func.value, node.args[0])]
        if any(_field_read(value) and _a_default(fallback) for value, fallback in pairs):
            found.add((node.lineno, f"{path.relative_to(root)}:{node.lineno}: {lines[node.lineno - 1].strip()}"))
    return [text for _, text in sorted(found)]


def readers() -> list[Path]:
    return sorted(p for part in READERS for p in ([SRC / part] if part.endswith(".py") else (SRC / part).rglob("*.py")))


def test_no_reader_of_results_re_decides_a_case_field():
    found = [line for path in readers() for line in redecided(path)]
    assert not found, "a case field defaulted after the planner:\n" + "\n".join(found)


def test_the_scan_sees_each_spelling(tmp_path):
    """The check is no stub: each way of re-deciding a field is found, and a figure's fallback is not a field."""
    source = tmp_path / "x.py"
    source.write_text("a = row.get('devices') or 1\n"
                      "b = int(num(row, 'batch_size') or 1)\n"
                      "c = case.epochs or spec.epochs\n"
                      "d = r['data'] or 'synthetic'\n"
                      "e = getattr(c, 'size', None) or 0\n"
                      "f = metrics.get('compute_precision') or case.precision\n"   # a figure's own, else the case's
                      "g = num(row, 'depth') or 0\n"                               # a figure, not a case field
                      "h = row.get('device') or 'n/a'\n"                          # how the unknown is shown
                      "i = info.get('devices') or []\n"                           # nothing
                      "j = c.get('precision', 'fp32')\n"
                      "k = pd.to_numeric(rows['batch_size']).fillna(1)\n"
                      "l = rows['data'].fillna('synthetic')\n"
                      "m = rows['model'].fillna(rows['workload'])\n"             # a column, not a default
                      "n = column(rows, 'final_metric').fillna(0)\n")           # a figure
    assert [line.split(": ", 1)[1][0] for line in redecided(source, tmp_path)] == ["a", "b", "c", "d", "e", "j",
                                                                                  "k", "l"]
