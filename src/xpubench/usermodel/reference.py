"""A reference to a user's model, checked by the parent before anything runs, without importing the
user's file (it is imported only inside a case's worker, so a crash, hang or OOM in it is that case's
result).

Forms: ``path/to/file.py:FUNCTION`` (a file; relative paths from the current folder) or
``package.module:FUNCTION`` (found on sys.path by ``find_module``, which runs no code, not even the
parent packages' ``__init__``: the worker imports them). Checks, each a ``UserError`` (one line, exit 2):
the file exists, is Python that parses (``ast``), and defines FUNCTION at module level (``def``, an
assignment or an import under that name); the given input shape, dtype and task parse (``spec.model_input``).
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from importlib.machinery import PathFinder
from pathlib import Path

from xpubench.errors import UserError

FORMS = "FILE.py:FUNCTION or module:function"
FRAMEWORK_IMPORTS = {"torch": "torch", "torchvision": "torch", "timm": "torch", "transformers": "torch",
                     "flax": "jax", "jax": "jax", "keras": "keras", "keras_hub": "keras"}


@dataclass(frozen=True)
class ModelRef:
    text: str          # as the user wrote it
    path: Path         # the source file, resolved
    function: str
    sha256: str        # of the file's bytes
    frameworks: tuple[str, ...]   # backends the function's code reaches (else the file's only one), a hint

    @property
    def name(self) -> str:
        return self.function

    @property
    def module(self) -> str | None:
        """The module of a ``package.module:FUNCTION`` reference; None for a file."""
        source = self.text.rpartition(":")[0]
        return None if _is_file(source) else source


def parse_reference(text: str) -> ModelRef:
    """The checked reference (see the module docstring)."""
    source, sep, function = str(text).rpartition(":")
    if not sep or not source or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", function):
        raise UserError(f"--model must be {FORMS}, got {text!r}")
    path = _source_path(source, text)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"model file {path} is unreadable: {exc.strerror or exc}") from exc
    try:
        tree = ast.parse(data, filename=str(path))
    except SyntaxError as exc:
        raise UserError(f"model file {path} is not valid Python: {exc.msg} (line {exc.lineno})") from exc
    except ValueError as exc:   # null bytes, undecodable source
        raise UserError(f"model file {path} is not a Python source file: {exc}") from exc
    names = module_level_names(tree)
    if function not in names:
        defined = sorted(n for n, kind in names.items() if kind == "def")
        hint = f"; functions defined there: {', '.join(defined)}" if defined else ""
        raise UserError(f"model file {path} defines no function {function!r} at module level{hint}")
    in_file = imported_frameworks(tree)
    frameworks = function_frameworks(tree, function) or (in_file if len(in_file) == 1 else ())
    return ModelRef(str(text), path, function, hashlib.sha256(data).hexdigest(), frameworks)


def _is_file(source: str) -> bool:
    return source.endswith(".py") or "/" in source or "\\" in source


def _source_path(source: str, text: str) -> Path:
    if _is_file(source):
        path = Path(source).expanduser().resolve()
        if not path.is_file():
            raise UserError(f"model file {source} does not exist (or is not a file)")
        return path
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", source):
        raise UserError(f"--model must be {FORMS}, got {text!r}")
    try:
        spec = find_module(source)
    except (ImportError, ValueError, OSError) as exc:
        raise UserError(f"model module {source} cannot be found: {exc}") from exc
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise UserError(f"model module {source} cannot be found as a Python source file on sys.path")
    return Path(spec.origin).resolve()


def find_module(name: str):
    """The spec of module ``name`` (``pkg.sub.mod``) on sys.path, found without running any code:
    ``PathFinder`` looks each package up in its parent's folders (``importlib.util.find_spec`` would import
    the parent packages, so an ``__init__`` that calls ``sys.exit`` or raises would end xpubench itself).
    None when a part is missing or is a module, not a package."""
    spec, search = None, None
    parts = name.split(".")
    for n in range(1, len(parts) + 1):
        if spec is not None:
            search = spec.submodule_search_locations
            if search is None:
                return None
        spec = PathFinder.find_spec(".".join(parts[:n]), search)
        if spec is None:
            return None
    return spec


def module_level_names(tree: ast.Module) -> dict[str, str]:
    """Names bound at module level: {name: "def" | "class" | "assign" | "import"}."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = "def"
        elif isinstance(node, ast.ClassDef):
            names[node.name] = "class"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update({t.id: "assign" for t in targets if isinstance(t, ast.Name)})
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: "import" for a in node.names})
    return names


def imported_frameworks(tree: ast.Module) -> tuple[str, ...]:
    """The backends a file's imports point to (anywhere in it): a hint for the parent, which can't know
    what FUNCTION returns; the worker detects the real framework from the returned object."""
    found = set()
    for node in ast.walk(tree):
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        found.update(FRAMEWORK_IMPORTS[m.split(".")[0]] for m in modules if m.split(".")[0] in FRAMEWORK_IMPORTS)
    return tuple(sorted(found))


def function_frameworks(tree: ast.Module, function: str) -> tuple[str, ...]:
    """The backends ``function``'s code reaches, so that a file holding a torch, a flax and a Keras model
    plans each function on its own framework: the module-level imports of torch / flax / jax / keras
    whose names it uses, directly or through the module-level functions, classes and assignments it
    uses (followed to any depth), and the imports inside them. Empty when it reaches none."""
    defined: dict[str, ast.AST] = {}
    imported: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update({t.id: node for t in targets if isinstance(t, ast.Name)})
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                module = alias.name if isinstance(node, ast.Import) else node.module or ""
                backend = FRAMEWORK_IMPORTS.get(module.split(".")[0])
                bound = (alias.asname or alias.name).split(".")[0]
                if backend:
                    imported[bound] = backend
                else:
                    imported.pop(bound, None)
    found: set[str] = set()
    todo, seen = [function], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in imported:
            found.add(imported[name])
        for node in ast.walk(defined.get(name, ast.Module(body=[], type_ignores=[]))):
            if isinstance(node, ast.Name):
                todo.append(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                found.update(FRAMEWORK_IMPORTS[m.split(".")[0]] for m in modules
                             if m.split(".")[0] in FRAMEWORK_IMPORTS)
    return tuple(sorted(found))
