"""References to the repository, read in its source, tests, scripts, benchmarks and docs: each names a file,
module or name that exists, and none names a place outside the repository (a clone has only the
repository).

A reference is a slashed or dotted name in a doc's text or in a Python file's comments and strings (its
code is checked by Python itself):
- a path whose first folder is one of the repository's (``docs/bad-input.md``) or the name of a package of
  xpubench at any depth (``results/fold.py``, ``backends/torch_/train.py``, ``llama/config.py`` inside
  workloads/, ``harness/cluster``, ``plan/defaults.model_precisions``): it exists relative to the
  repository, src, src/xpubench, the file naming it, or a package of that name (a path into another
  project starts with a folder none of these has: ``torch/utils/flop_counter.py``, ``jax/_src/...``);
  a path whose second folder is a backend's name is a case's key (``llama/torch/cpu/...``), not a path;
- a dotted name that starts with ``xpubench`` or one of its top-level packages (``xpubench.plan.resolve``,
  ``api.run``, ``results.schema.Run.case``): a module, a name it defines or imports, then a name its class
  defines or inherits (an f-string's fields are code, not read: ``{report.name}``);
- a file's name alone (``cli.py``), outside tests/ (whose examples make files of their own): some file of
  the repository has that name;
- an old flat module name (``<package>_<module>``, e.g. ``plan_defaults.py``) where the module is now
  ``<package>/<module>.py``;
- no path leads outside the repository: nothing under a ``shared`` folder (``shared/notes/...``,
  ``../shared``) but the datasets the tests read (``shared/datasets``), and no ``../`` path that leaves it.
``NOT_REFERENCES`` lists, with why, the few names that look like a reference and are not one; ``EXAMPLES``
the files whose text is made-up references.

A Python file's comments and strings are found once per text by one regular expression, and its tree comes
from ``source_trees`` (shared with the other checks): the whole check costs about half a second."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from source_trees import parsed

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "xpubench"
SCANNED = ("src", "tests", "docs", "scripts", "benchmarks", "README.md")
SUFFIXES = {".py", ".md", ".sh"}
CHECKED_ENDINGS = {"py", "md", "sh"}   # a source file or a doc
DATA_ENDINGS = {"json", "jsonl", "html", "txt", "png", "csv", "gguf", "toml", "yaml", "log", "safetensors", "bin"}

NOT_REFERENCES = {
    "FILE.py": "the placeholder of --model FILE.py:FUNCTION",
    "my_models.py": "a user's model file, in examples",
    "models.py": "a user's model file, in examples",
    "broken.py": "a user's model file, in examples",
    "clash.py": "a user's model file, in examples",
    "convert_hf_to_gguf.py": "llama.cpp's converter",
    "xpubench.x": "the placeholder of a module (xpubench.x.y)",
    "results/reference": "made by the accelerator check (scripts/accelerator_check.py --out)",
    "tests/__pycache__": "made by Python",
    "devices/chip": "a ratio in words (2 devices/chip)",
    "devices/frameworks": "words (devices or frameworks)",
    "plan.cases": "a plan file's field, as its errors name it",
    "plan.settings": "a plan file's field, as its errors name it",
    "energy.window": "the training loop's EnergyWindows, named energy there",
}
EXAMPLES = {   # files whose text is made-up modules and references, to test the checks that read them
    "tests/test_structure.py": "the layer, cycle, name and reference checks' examples",
    "tests/stale_references.py": "this check's description",
}

# a slashed or dotted name; one that runs on into a pattern (tests/test_*.py, docs/img/report-*.png) is none
NAME = re.compile(r"(?<![\w./-])((?:\.\./)*[A-Za-z_][\w-]*(?:[./][A-Za-z_][\w-]*)+/?)(?![\w*{<$-])")
OUTSIDE = re.compile(r"(?<![\w.-])(?:[\w.-]*/)*shared/(?!datasets\b)[\w./-]*"
                     r"|(?<![\w.-])(?:\.\./)+shared\b(?!/datasets)")


# a Python file's comments and string literals; an f-string's {fields} are code (``{report.name}``)
PYTHON_TEXT = re.compile(r'(?s)(\'\'\'|""")(?:\\.|.)*?\1|#[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
FIELD = re.compile(r"\{[^{}\n]*\}")


@functools.cache
def _texts(text: str, python: bool) -> tuple[tuple[int, str], ...]:
    """(line number, text) of every line a reference can be in: a Python file's comments and strings (their
    {fields} read as a wildcard), any other file's every line."""
    if not python:
        return tuple(enumerate(text.splitlines(), 1))
    out = []
    for match in PYTHON_TEXT.finditer(text):
        first = text.count("\n", 0, match.start()) + 1
        out += [(first + i, FIELD.sub("*", line)) for i, line in enumerate(match.group().splitlines())]
    return tuple(out)


def _statements(body):
    """The statements of a body, through ``if``, ``try`` and ``with`` blocks."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", []),
                          *(h.body for h in getattr(node, "handlers", []))):
                yield from _statements(block)


def _targets(node) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    return [n for elt in node.elts for n in _targets(elt)] if isinstance(node, (ast.Tuple, ast.List)) else []


@functools.cache
def _defined(body: tuple[ast.stmt, ...]) -> dict[str, ast.AST]:
    """Every name a module's or a class's body defines, and the statement that defines it."""
    out: dict[str, ast.AST] = {}
    for node in _statements(body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.Assign):
            out.update({n: node for t in node.targets for n in _targets(t)})
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            out.update({n: node for n in _targets(node.target)})
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update({a.asname or a.name.split(".")[0]: node for a in node.names})
    return out


def _class_names(cls: ast.ClassDef) -> set[str]:
    """Methods, class attributes and fields, nested classes, and ``self.x = ...`` anywhere in the class."""
    return set(_defined(tuple(cls.body))) | {
        t.attr for n in ast.walk(cls) if isinstance(n, (ast.Assign, ast.AnnAssign))
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}


class Repository:
    """What a reference can name: the repository's files, the package's modules, the names each defines."""

    def __init__(self, repo: Path):
        self.repo = repo
        self.root = repo / "src" / PACKAGE
        self.modules: dict[str, Path] = {}
        for path in sorted(self.root.rglob("*.py")):
            parts = [PACKAGE, *path.relative_to(self.root).with_suffix("").parts]
            self.modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
        self.package_dirs = [p.parent for p in self.root.rglob("__init__.py") if p.parent != self.root]
        self.top_packages = {p.name for p in self.package_dirs if p.parent == self.root}
        self.folders = {p.name for p in self.package_dirs} | {p.name for p in repo.iterdir() if p.is_dir()}
        self.backends = {p.name.rstrip("_") for p in (self.root / "backends").glob("*")}
        self.file_names = {p.name for top in SCANNED for p in (repo / top).rglob("*")} | {
            p.name for p in repo.iterdir()}

    def problem(self, name: str, where: Path) -> str | None:
        """Why ``name`` (read in the file ``where``) names nothing of the repository, or None where it
        names something (or is no reference)."""
        if "/" in name:
            return self._path_problem(name, where)
        parts = name.split(".")
        if parts[-1] == "py" and len(parts) == 2:
            if name not in self.file_names and where.relative_to(self.repo).parts[0] != "tests":
                return "no file of that name"
        elif parts[-1] in DATA_ENDINGS | CHECKED_ENDINGS:
            return None   # a file a run reads or writes (results.jsonl)
        elif (parts[0] == PACKAGE or parts[0] in self.top_packages) and not self._exists(parts):
            return "no such module or name"
        return None

    def flat_name(self, name: str) -> str | None:
        """The module an old flat name (``plan_defaults.py``, ``cli_run.x``) stood for, where it is left."""
        package, _, module = re.split(r"[./]", name)[0].partition("_")
        if package in self.top_packages and f"{PACKAGE}.{package}.{module}" in self.modules:
            return f"{package}/{module}.py"
        return None

    # -- paths
    def _path_problem(self, name: str, where: Path) -> str | None:
        path = name.rstrip("/").split("/")
        stem, _, rest = path[-1].partition(".")
        if rest in DATA_ENDINGS:
            return None   # a file a run reads or writes (results/run.jsonl, ../evil.bin in a hostile input)
        if path[0] == ".." and "shared" not in path:   # (a shared folder is OUTSIDE's)
            target = (where.parent / name).resolve()
            inside = target.is_relative_to(self.repo.resolve()) and target.exists()
            return None if inside else "outside the repository"
        if path[0] not in self.folders or (len(path) > 1 and path[1] in self.backends):
            return None   # another project's path, or a case's key
        if rest in CHECKED_ENDINGS:
            return None if self._file(name.rstrip("/"), path[0], where) else "no such file"
        module = self._file("/".join([*path[:-1], stem]), path[0], where)
        if module is None:
            return "no such file or folder"
        if rest:
            dotted = self._module_of(module)
            if dotted is None or not self._exists([*dotted.split("."), *rest.split(".")]):
                return "no such module or name"
        return None

    def _file(self, path: str, first: str, where: Path) -> Path | None:
        bases = [self.repo, self.repo / "src", self.root, where.parent,
                 *(d.parent for d in self.package_dirs if d.name == first)]
        return next((base / p for base in bases for p in (path, f"{path}.py") if (base / p).exists()), None)

    def _module_of(self, path: Path) -> str | None:
        path = path / "__init__.py" if path.is_dir() else path
        return next((name for name, file in self.modules.items() if file == path), None)

    # -- dotted names
    def _exists(self, parts: list[str]) -> bool:
        parts = parts if parts[0] == PACKAGE else [PACKAGE, *parts]
        cut = max(i for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in self.modules)
        if cut == len(parts):
            return True
        found = self._find(".".join(parts[:cut]), parts[cut])
        if found is None:
            return False
        if found is True or cut + 1 == len(parts) or not isinstance(found[1], ast.ClassDef):
            return True   # a function's or a value's attributes are not read
        return self._has(*found, parts[cut + 1])

    def _find(self, module: str, name: str):
        """(module, statement) that defines ``name`` in ``module``, through ``from x import name`` within the
        package; True where it cannot be read further (a lazy ``__getattr__``, another project's name); None
        where ``module`` has no such name."""
        for _ in range(8):
            if f"{module}.{name}" in self.modules:
                return True
            tree = parsed(self.modules[module].read_text(encoding="utf-8"), str(self.modules[module]))
            defined = _defined(tuple(tree.body))
            node = defined.get(name)
            if node is None:
                exported = defined.get("__all__")
                lazy = "__getattr__" in defined
                return True if lazy and (exported is None or name in ast.literal_eval(exported.value)) else None
            if not isinstance(node, ast.ImportFrom):
                return module, node
            origin = _absolute(module, self.modules[module].name == "__init__.py", node)
            if origin not in self.modules:
                return True
            module, name = origin, next(a.name for a in node.names if (a.asname or a.name) == name)
        return True

    def _has(self, module: str, cls: ast.ClassDef, name: str) -> bool:
        """Whether the class (in ``module``) defines or inherits ``name``; a base of another project's counts
        as having it."""
        if name in _class_names(cls):
            return True
        for base in cls.bases:
            found = self._find(module, base.id) if isinstance(base, ast.Name) else True
            if found is True or (found and isinstance(found[1], ast.ClassDef) and self._has(*found, name)):
                return True
        return False


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names (``from . import x`` / ``from ..a import b`` resolved)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    return ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))


def scanned_files(repo: Path) -> list[Path]:
    found = [p for top in SCANNED
             for p in ([repo / top] if (repo / top).is_file() else sorted((repo / top).rglob("*")))]
    return [p for p in found if p.is_file() and p.suffix in SUFFIXES
            and p.relative_to(repo).as_posix() not in EXAMPLES and "__pycache__" not in p.parts]


def stale_references(repo: Path = REPO) -> list[str]:
    """``file:line: name (why)`` for every reference that names nothing of the repository, or a place
    outside it."""
    repository = Repository(repo)
    found = []
    for path in scanned_files(repo):
        rel = path.relative_to(repo).as_posix()
        text = path.read_text(encoding="utf-8")
        python = path.suffix == ".py"
        for number, line in _texts(text, python):
            found += [f"{rel}:{number}: {outside} (outside the repository)" for outside in OUTSIDE.findall(line)]
            for name in NAME.findall(line):
                name = name.rstrip(".")
                if any(name == n or name.startswith((n + ".", n + "/")) for n in NOT_REFERENCES):
                    continue
                why = repository.problem(name, path)
                flat = None if why else repository.flat_name(name)
                if why or flat:
                    found.append(f"{rel}:{number}: {name} ({why or f'an old flat name: now {flat}'})")
    return found
