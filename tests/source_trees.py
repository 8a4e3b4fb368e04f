"""The syntax trees of source files, parsed and walked once per test process and shared by the checks that
read every module of src/xpubench (test_structure, test_security, test_workload_record): parsing the ~250
files costs ~1.5 s of CPU and walking them ~0.4 s, so a process that runs two of these checks pays once.
Keyed by the file's text (an edited file is parsed again); the trees and node lists are shared: read-only."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def parsed(text: str, filename: str) -> ast.Module:
    """The syntax tree of a file's text, parsed once per text."""
    return ast.parse(text, filename=filename)


@functools.cache
def nodes(text: str, filename: str) -> tuple[ast.AST, ...]:
    """Every node of the tree (``ast.walk``'s order), listed once per text."""
    return tuple(ast.walk(parsed(text, filename)))


def file_nodes(path: Path) -> tuple[ast.AST, ...]:
    """``nodes`` of the file at ``path``."""
    return nodes(path.read_text(encoding="utf-8"), str(path))
