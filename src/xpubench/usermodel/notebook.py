"""A model function defined in a notebook, made importable by a worker: never pickled.

A worker imports the user's function from a file; a notebook's function has no file. ``isolate(fn)``
writes a module that rebuilds it from source, always to the same file for the same function name
(``xpubench-notebook/nb_NAME.py`` in the temp folder), so its results keep one key across edits, as a
file's do (each result's ``model_sha256`` tells the versions apart): the function's own source
(``inspect.getsource``; IPython keeps every cell's source in ``linecache``), preceded by what its body
uses from the notebook's globals:

- a module -> ``import module as name``;
- a function or class from an importable module -> ``from module import qualname as name``;
- a function or class defined in the notebook -> its source, with what *it* uses, recursively;
- a constant (None, bool, int, float, str, bytes, and tuples / lists / dicts of them) -> ``name = repr``.

Anything else (an array, a model object, a closure over a cell's local) can't be rebuilt from source:
``isolate`` raises ``NotIsolatable`` with the name and why, and ``reference_for`` returns the function
itself with a warning that says what running it in this process loses (``IN_PROCESS_LOSES``).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import linecache
import os
import tempfile
import textwrap
import types
from pathlib import Path

IN_PROCESS_LOSES = ("it runs in this Python process: a crash, hang or out-of-memory in the model ends this "
                    "session instead of becoming the case's result, there is no timeout, and the timings "
                    "share the process with everything the notebook has loaded")
CONSTANTS = (type(None), bool, int, float, complex, str, bytes)


class NotIsolatable(Exception):
    """The function can't be rebuilt from source in another process; the message says which name and why."""


def isolate(fn, folder: Path | None = None) -> str:
    """Write ``fn`` and what it uses to a module file; returns the ``FILE.py:FUNCTION`` reference."""
    if not isinstance(fn, types.FunctionType):
        raise NotIsolatable(f"{fn!r} is not a plain Python function")
    if fn.__name__ == "<lambda>":
        raise NotIsolatable("a lambda has no name to import: define the model function with def")
    lines: list[str] = []
    _add(fn, fn.__name__, lines, set())
    text = "# written by xpubench from a notebook's source; safe to delete\n" + "\n".join(lines) + "\n"
    folder = Path(folder or tempfile.gettempdir()) / "xpubench-notebook"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"nb_{fn.__name__}.py"
    if not path.is_file() or path.read_text() != text:
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".tmp", delete=False) as fh:
            fh.write(text)
        os.replace(fh.name, path)   # whole: a worker importing it never reads half a file
    return f"{path}:{fn.__name__}"


def reference_for(model) -> tuple[object, str | None]:
    """(``"FILE.py:FUNCTION"``, None) for a reference string or an isolatable function, else
    (the function itself, a warning naming what was not isolatable and what running in process loses)."""
    if isinstance(model, str):
        return model, None
    try:
        return isolate(model), None
    except NotIsolatable as exc:
        return model, f"{getattr(model, '__name__', model)} can't run in a worker ({exc}); {IN_PROCESS_LOSES}"


def _add(obj, name: str, lines: list[str], done: set[str]) -> None:
    """Append the definition of ``obj`` (bound to ``name``) after what it needs."""
    if name in done:
        return
    done.add(name)
    if obj.__name__ != name:
        raise NotIsolatable(f"{name} is another name for {obj.__name__}: use the original name")
    source = _source(obj)
    scope = _globals_of(obj)
    if getattr(obj, "__closure__", None):
        raise NotIsolatable(f"{name} closes over local variables {', '.join(obj.__code__.co_freevars)}")
    for used in sorted(_free_names(source)):
        if used in done or used not in scope or hasattr(builtins, used) and scope.get(used) is getattr(builtins, used):
            continue
        lines.append(_definition(used, scope[used], lines, done))
    lines.append(source)


def _definition(name: str, value, lines: list[str], done: set[str]) -> str:
    if isinstance(value, types.ModuleType):
        return f"import {value.__name__} as {name}" if value.__name__ != name else f"import {name}"
    if _constant(value):
        return f"{name} = {value!r}"
    if isinstance(value, (types.FunctionType, type)):
        module, qualname = value.__module__, value.__qualname__
        if module not in ("__main__", None) and "<locals>" not in qualname and _importable(module):
            return f"from {module} import {qualname} as {name}" if "." not in qualname else \
                f"import {module} as _m_{name}\n{name} = _m_{name}.{qualname}"
        _add(value, name, lines, done)
        return ""
    raise NotIsolatable(f"{name} is a {type(value).__name__} made in the notebook (only modules, functions, "
                        "classes and constants can be rebuilt from source)")


def _source(obj) -> str:
    try:
        return textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError):
        pass
    if isinstance(obj, type):   # some Pythons can't find a notebook class's cell: find it through a method
        for member in vars(obj).values():
            code = getattr(member, "__code__", None)
            if code is not None:
                tree = ast.parse("".join(linecache.getlines(code.co_filename)) or "pass")
                for node in ast.walk(tree):
                    if isinstance(node, ast.ClassDef) and node.name == obj.__name__:
                        return ast.get_source_segment("".join(linecache.getlines(code.co_filename)), node)
    raise NotIsolatable(f"the source of {obj.__qualname__} is not available")


def _globals_of(obj) -> dict:
    if isinstance(obj, type):
        for member in vars(obj).values():
            if isinstance(member, types.FunctionType):
                return member.__globals__
        return vars(importlib.import_module("__main__"))
    return obj.__globals__


def _free_names(source: str) -> set[str]:
    """Names a definition reads, less those it binds itself (arguments, assignments: a name both read
    from the notebook and assigned locally is taken as local)."""
    tree = ast.parse(source)
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments)
              for a in [*n.posonlyargs, *n.args, *n.kwonlyargs, n.vararg, n.kwarg] if a is not None}
    return loaded - bound


def _constant(value) -> bool:
    if isinstance(value, CONSTANTS):
        return True
    if isinstance(value, (tuple, list)):
        return all(_constant(v) for v in value)
    if isinstance(value, dict):
        return all(_constant(k) and _constant(v) for k, v in value.items())
    return False


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
        return True
    except ImportError:
        return False
