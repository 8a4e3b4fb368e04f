"""The code's shape, built from the source with ast (nothing is imported): no import cycle among
src/xpubench modules (imports inside functions count too, and so does a module started in a child process,
``python -m xpubench.x.y``), no two packages importing each other, no import from a lower layer to a
higher one (``LAYERS``, the one declaration of the order; docs/architecture.md draws it), no source file
over 400 lines or 16,000 characters, at most 8 modules directly in src/xpubench/ (the rest lives in packages named after
the steps of a run), and every reference in src, tests, scripts, benchmarks and docs to a module, a name in
one or a file names what the repository holds, and no path outside it (tests/stale_references.py)."""

from __future__ import annotations

import ast
import functools
import itertools
import re
from pathlib import Path

from source_trees import nodes
from stale_references import stale_references

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "xpubench"
MAX_LINES = 400
MAX_CHARS = 16_000  # 400 lines of 40 characters: the line rule, met by packing long lines, missed size
MAX_TOP_MODULES = 8

# The layers, top first: a module may import its own layer and those below it, never one above. A name
# is a package (its modules) or a module; the longest name that contains a module places it.
LAYERS: list[tuple[str, ...]] = [
    ("xpubench", "xpubench.__main__"),                     # the notebook facade and `python -m xpubench`
    ("xpubench.cli",),                                     # one module per command
    ("xpubench.fleet",),                                   # one plan on many machines through their engines
    ("xpubench.api",),                                     # run / load / report / compare / bench
    ("xpubench.publish",),                                 # results shared: stdout formats, the static site
    ("xpubench.report", "xpubench.doctor"),                # what people read; the self-check
    ("xpubench.analysis",),                                # every derived figure, after loading
    ("xpubench.ceilings",),                                # measured ceilings, their cache
    ("xpubench.plan",),                                    # request -> cases: options, defaults, estimates
    ("xpubench.launch",),                                  # K worker processes per case, results appended
    ("xpubench.serve",),                                   # xpubench serve: a server started, loaded, recorded
    ("xpubench.usermodel",),                               # a user's model made a workload
    ("xpubench.backends",),                                # one record per framework: its adapters
    ("xpubench.harness",),                                 # the measuring loops and their protocols
    ("xpubench.data",),                                    # real-format loaders, synthetic data
    ("xpubench.workloads",),                               # one record per workload
    ("xpubench.devices", "xpubench.energy"),               # device facts; meters
    ("xpubench.results",),                                 # the record format
    ("xpubench.case", "xpubench.errors", "xpubench.version", "xpubench.envnames", "xpubench.readfile",
     "xpubench.legible"),                                     # the ground floor: every layer may import it
]


def module_files(src: Path = SRC) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package (a package is its __init__)."""
    out = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names (``from . import x`` / ``from ..a import b`` resolved)."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _nearest(name: str, modules: dict[str, Path]) -> str | None:
    """The module ``name`` is, or the nearest package above it that is one of ours."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


MODULE_RUN = re.compile(r"(?:^|\s)-m\s+(xpubench(?:\.\w+)*)")   # "python -m xpubench.backends.detect"


def _started(name: str, modules: dict[str, Path]) -> str:
    """The module ``python -m name`` runs: a package's ``__main__`` where it has one."""
    return f"{name}.__main__" if f"{name}.__main__" in modules else name


def started_modules(node: ast.AST, modules: dict[str, Path]) -> list[str]:
    """Modules a node starts in a child process: a string ``... -m xpubench.x ...``, or the strings
    ``"-m", "xpubench.x"`` side by side in a list, tuple or call (``[sys.executable, "-m", "xpubench.x"]``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [_started(m, modules) for m in MODULE_RUN.findall(node.value)]
    items = node.elts if isinstance(node, (ast.List, ast.Tuple)) else node.args if isinstance(node, ast.Call) else []
    texts = [i.value if isinstance(i, ast.Constant) and isinstance(i.value, str) else None for i in items]
    return [_started(b, modules) for a, b in itertools.pairwise(texts)
            if a == "-m" and b and (b == PACKAGE or b.startswith(PACKAGE + "."))]


STARTS = (ast.Constant, ast.List, ast.Tuple, ast.Call)   # the nodes started_modules can find a start in


def imports_of(module: str, path: Path, modules: dict[str, Path], children: bool = True,
               text: str | None = None) -> set[str]:
    """Our modules that ``module`` imports anywhere in its file (top level, functions, classes, guards),
    and with ``children`` those it starts in a child process (``python -m xpubench.x``: its layer's code
    runs for this module, so it counts for the layers; it is no import cycle, the child is a new process).
    ``from pkg import sub`` counts as importing ``pkg.sub`` when that is a module, else ``pkg``."""
    text = path.read_text(encoding="utf-8") if text is None else text
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in nodes(text, str(path)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, is_package, node)
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        elif children and isinstance(node, STARTS):
            names = started_modules(node, modules)
        else:
            continue
        for name in names:
            if name == PACKAGE or name.startswith(PACKAGE + "."):
                target = _nearest(name, modules)
                if target and target != module:
                    found.add(target)
    return found


def import_graph(src: Path = SRC, children: bool = True) -> dict[str, set[str]]:
    """Module -> the modules it imports (``imports_of``); built once per set of file texts (read-only)."""
    modules = module_files(src)
    return _graph(tuple((name, path, path.read_text(encoding="utf-8")) for name, path in modules.items()), children)


@functools.lru_cache(maxsize=8)
def _graph(files: tuple[tuple[str, Path, str], ...], children: bool) -> dict[str, set[str]]:
    modules = {name: path for name, path, _ in files}
    return {name: imports_of(name, path, modules, children, text) for name, path, text in files}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root, targets in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(targets)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _edges_inside(graph: dict[str, set[str]], component: list[str]) -> str:
    members = set(component)
    return "; ".join(f"{a} -> {b}" for a in component for b in sorted(graph[a] & members))


def test_no_import_cycle_among_src_modules():
    graph = import_graph(children=False)
    found = cycles(graph)
    assert not found, "import cycles (imports inside functions count):\n" + "\n".join(
        f"  {' <-> '.join(c)}: {_edges_inside(graph, c)}" for c in found)


def layer_of(module: str, layers=LAYERS) -> int | None:
    """The index of the layer that holds ``module`` (0 = top), or None where no name contains it."""
    best: tuple[int, int] | None = None
    for index, names in enumerate(layers):
        for name in names:
            if (module == name or module.startswith(name + ".")) and (best is None or len(name) > best[1]):
                best = (index, len(name))
    return best[0] if best else None


def climbing_imports(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """Every import from a module to one in a higher layer, as "a (layer) -> b (layer)"."""
    return [f"{a} ({layers[layer_of(a, layers)][0]}) -> {b} ({layers[layer_of(b, layers)][0]})"
            for a in sorted(graph) for b in sorted(graph[a]) if layer_of(b, layers) < layer_of(a, layers)]


def packages(src: Path = SRC) -> set[str]:
    return {name for name, path in module_files(src).items() if path.name == "__init__.py"}


def package_loops(graph: dict[str, set[str]], packages: set[str]) -> list[str]:
    """Every two sibling packages that import each other, at any depth (results <-> devices, or
    report.tables <-> report.charts), with the imports each way: each import is counted between the two
    packages just below the deepest package holding both ends."""
    edges: dict[tuple[str, str], list[str]] = {}
    for a in sorted(graph):
        for b in sorted(graph[a]):
            pa, pb = a.split("."), b.split(".")
            common = next((i for i, (x, y) in enumerate(zip(pa, pb)) if x != y), min(len(pa), len(pb)))
            ra, rb = ".".join(pa[:common + 1]), ".".join(pb[:common + 1])
            if ra != rb and ra in packages and rb in packages:
                edges.setdefault((ra, rb), []).append(f"{a} -> {b}")
    return [f"{pa} <-> {pb}: {'; '.join(edges[pa, pb] + edges[pb, pa])}"
            for pa, pb in sorted(edges) if pa < pb and (pb, pa) in edges]


def test_no_two_packages_import_each_other():
    loops = package_loops(import_graph(), packages())
    assert not loops, "packages that import each other (put the module where it belongs):\n  " + "\n  ".join(loops)


def test_every_module_has_a_layer():
    unplaced = [m for m in module_files() if layer_of(m) is None]
    assert not unplaced, f"add these to a layer of LAYERS: {unplaced}"


def test_no_import_from_a_lower_layer_to_a_higher_one():
    climbs = climbing_imports(import_graph())
    assert not climbs, "imports that climb (move the shared name down, or pass it in):\n  " + "\n  ".join(climbs)


def test_the_layer_check_finds_a_climb(tmp_path):
    pkg = tmp_path / PACKAGE
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "high.py").write_text("from xpubench.low import base\n")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "low" / "base.py").write_text("def f():\n    from xpubench import high\n")
    layers = [("xpubench", "xpubench.high"), ("xpubench.low",)]
    assert climbing_imports(import_graph(tmp_path), layers) == [
        "xpubench.low.base (xpubench.low) -> xpubench.high (xpubench)"]


def test_the_package_check_finds_two_packages_on_one_layer_importing_each_other(tmp_path):
    pkg = tmp_path / PACKAGE
    for sub in ("one", "two"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "one" / "a.py").write_text("from xpubench.two import b\n")
    (pkg / "two" / "b.py").write_text("import os\n")
    (pkg / "two" / "c.py").write_text("def f():\n    from xpubench.one import a\n")
    layers = [("xpubench",), ("xpubench.one", "xpubench.two")]
    graph = import_graph(tmp_path)
    assert cycles(graph) == [] and climbing_imports(graph, layers) == []   # the module checks see nothing
    assert package_loops(graph, packages(tmp_path)) == [
        "xpubench.one <-> xpubench.two: xpubench.one.a -> xpubench.two.b; xpubench.two.c -> xpubench.one.a"]
    (pkg / "two" / "c.py").write_text("import os\n")
    (pkg / "one" / "deep").mkdir()   # rooms inside a package: the same rule one level down
    (pkg / "one" / "deep" / "__init__.py").write_text("from xpubench.one import a\n")
    (pkg / "one" / "a.py").write_text("from xpubench.one.deep import x\n")
    (pkg / "one" / "deep" / "x.py").write_text("")
    assert package_loops(import_graph(tmp_path), packages(tmp_path)) == []   # a module and a room: no loop
    (pkg / "one" / "low").mkdir()
    (pkg / "one" / "low" / "__init__.py").write_text("")
    (pkg / "one" / "low" / "y.py").write_text("from xpubench.one.deep import x\n")
    (pkg / "one" / "deep" / "x.py").write_text("def f():\n    from xpubench.one.low import y\n")
    assert package_loops(import_graph(tmp_path), packages(tmp_path)) == [
        ("xpubench.one.deep <-> xpubench.one.low: xpubench.one.deep.x -> xpubench.one.low.y; "
         "xpubench.one.low.y -> xpubench.one.deep.x")]


def test_a_module_started_in_a_child_process_counts_as_an_import(tmp_path):
    pkg = tmp_path / PACKAGE
    (pkg / "low").mkdir(parents=True)
    (pkg / "tool").mkdir()
    for init in (pkg, pkg / "low", pkg / "tool"):
        (init / "__init__.py").write_text("")
    (pkg / "high.py").write_text("")
    (pkg / "tool" / "__main__.py").write_text("")
    (pkg / "low" / "a.py").write_text(
        "import subprocess, sys\n"
        "def f():\n    subprocess.run([sys.executable, '-m', 'xpubench.high', 'x'])\n")
    (pkg / "low" / "b.py").write_text("CMD = 'python3 -m xpubench.tool --fast'\nOTHER = ('-m', 'numpy')\n")
    (pkg / "low" / "c.py").write_text("NAME = 'xpubench.high'   # a name alone is no start\n")
    graph = import_graph(tmp_path)
    assert graph["xpubench.low.a"] == {"xpubench.high"}
    assert graph["xpubench.low.b"] == {"xpubench.tool.__main__"}
    assert graph["xpubench.low.c"] == set()
    layers = [("xpubench", "xpubench.high", "xpubench.tool"), ("xpubench.low",)]
    assert climbing_imports(graph, layers) == [
        "xpubench.low.a (xpubench.low) -> xpubench.high (xpubench)",
        "xpubench.low.b (xpubench.low) -> xpubench.tool.__main__ (xpubench)"]


def test_at_most_8_modules_directly_in_the_package():
    top = sorted(p.name for p in (SRC / PACKAGE).glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, f"{len(top)} modules in src/xpubench/ (at most {MAX_TOP_MODULES}): {top}"


def test_no_source_file_over_400_lines():
    long = {str(p.relative_to(SRC)): n for p in module_files().values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"split these files (over {MAX_LINES} lines): {long}"


def test_no_source_file_over_16000_characters():
    big = {str(p.relative_to(SRC)): n for p in module_files().values()
           if (n := len(p.read_text(encoding="utf-8"))) > MAX_CHARS}
    assert not big, f"split these files by meaning (over {MAX_CHARS:,} characters): {big}"


def test_every_reference_names_something_in_the_repository():
    stale = stale_references()
    assert not stale, ("references in src, tests, scripts, benchmarks or docs to what the repository does not "
                       "hold (name where it lives now; see tests/stale_references.py):\n  " + "\n  ".join(stale))


def test_the_reference_check_finds_each_kind_of_stale_reference(tmp_path):
    files = {
        "src/xpubench/__init__.py": "",
        "src/xpubench/results/__init__.py": "",
        "src/xpubench/results/fold.py": ("class Base:\n    def seen(self):\n        self.kept = 1\n\n\n"
                                         "class Run(Base):\n    case: dict\n\n\ndef aggregate_all():\n    pass\n"),
        "src/xpubench/plan/__init__.py": "from xpubench.results.fold import Run\n",
        "src/xpubench/plan/defaults.py": ("STEPS = 3   # plan.STEPS is not here; plan/defaults.STEPS is\n"
                                          "plan = 'plan.cases' and plan.nothing   # code is not read\n"
                                          "NAME = f'{plan.title}/run.py'   # an f-string's field is code\n"),
        "src/xpubench/workloads/__init__.py": "", "src/xpubench/workloads/llama/__init__.py": "",
        "src/xpubench/workloads/llama/config.py": "",
        "src/xpubench/backends/__init__.py": "", "src/xpubench/backends/torch_/__init__.py": "",
        "docs/a.md": ("Fine: results/fold.py, `llama/config.py`, xpubench.results.fold.Run.case, plan.Run.seen,\n"
                      "plan.Run.kept, results/fold.aggregate_all, src/xpubench/plan/defaults.py, docs/a.md,\n"
                      "torch/utils/flop_counter.py, ../shared/datasets/mnist, llama/torch/cpu/train/fp32/b32,\n"
                      "results.jsonl, report.html, tests/test_*.py.\n"
                      "Stale: results/aggregate.py, xpubench.results.fold.Run.as_dict, plan.resolve,\n"
                      "results/fold.aggregate, plan_defaults.quick_steps, docs/gone.md, cli.py, workloads/gpt/,\n"
                      "outside: shared/notes/cpu-facts.md, ../shared, ../elsewhere/notes.md (../docs/a.md is in).\n"),
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert stale_references(tmp_path) == [
        "src/xpubench/plan/defaults.py:1: plan.STEPS (no such module or name)",
        "docs/a.md:5: results/aggregate.py (no such file)",
        "docs/a.md:5: xpubench.results.fold.Run.as_dict (no such module or name)",
        "docs/a.md:5: plan.resolve (no such module or name)",
        "docs/a.md:6: results/fold.aggregate (no such module or name)",
        "docs/a.md:6: plan_defaults.quick_steps (an old flat name: now plan/defaults.py)",
        "docs/a.md:6: docs/gone.md (no such file)",
        "docs/a.md:6: cli.py (no file of that name)",
        "docs/a.md:6: workloads/gpt/ (no such file or folder)",
        "docs/a.md:7: shared/notes/cpu-facts.md (outside the repository)",
        "docs/a.md:7: ../shared (outside the repository)",
        "docs/a.md:7: ../elsewhere/notes.md (outside the repository)",
    ]


def test_the_cycle_finder_finds_a_cycle_made_by_an_import_inside_a_function(tmp_path):
    pkg = tmp_path / PACKAGE
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from xpubench.sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import c\n")
    (pkg / "c.py").write_text("import xpubench.a as a\n")
    (pkg / "d.py").write_text("from xpubench import a\n")   # imports into the cycle, is not part of it
    graph = import_graph(tmp_path)
    assert graph["xpubench.sub.b"] == {"xpubench.c"}
    assert graph["xpubench.d"] == {"xpubench.a"}
    assert cycles(graph) == [["xpubench.a", "xpubench.c", "xpubench.sub.b"]]
    (pkg / "c.py").write_text("import numpy\n")
    assert cycles(import_graph(tmp_path)) == []


# A framework's or a workload's name belongs to its package (backends/, workloads/): elsewhere, a string that
# is one is a branch on a name where the backend's or the workload's record should say what it needs. These
# files name one for a reason of their own (``matmul`` is a mode too, and not checked):
OWN_NAMES = ("torch", "jax", "flax", "keras", "tensorflow", "llamacpp", "llama", "gpt", "selftest", "mnist_cnn",
             "fashion_cnn", "cifar10_resnet", "imdb_lstm", "shakespeare_lstm", "weather_gru")
NAMED_FOR_A_REASON = {
    "backends/": "the backends' own package",
    "workloads/": "the workloads' own package",
    "usermodel/": "a user's model file names its framework (torch, jax/flax, keras)",
    "devices/kernels.py": "the kernel libraries each framework links (cuBLAS through torch, XLA through jax)",
    "devices/knowngood.py": "published figures, each measured with a named framework",
    "api/bench.py": "bench(checkpoint=...) runs llama on a user's checkpoint",
    "plan/brief.py": "the brief default run's order of workloads (PRIORITY)",
    "serve/": "xpubench serve loads llama.cpp's llama-server with a llama GGUF",
    "cli/serve.py": "--server llamacpp: the server xpubench serve can start",
    "results/validate.py": "older files' selftest records hold no size and no time, and a record has no field "
                           "that says a case measured nothing",
}


def names_outside_packages(src: Path = SRC) -> list[str]:
    """``file:line: name`` for every string constant (docstrings aside) that is exactly a framework's or a
    workload's name, in a file that ``NAMED_FOR_A_REASON`` does not list."""
    found = []
    root = src / PACKAGE
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if any(rel.startswith(allowed) for allowed in NAMED_FOR_A_REASON):
            continue
        every = nodes(path.read_text(encoding="utf-8"), str(path))
        docstrings = {id(node.body[0].value) for node in every
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        found += [f"{rel}:{node.lineno}: {node.value!r}" for node in every
                  if isinstance(node, ast.Constant) and node.value in OWN_NAMES and id(node) not in docstrings]
    return sorted(found)


def test_framework_and_workload_names_stay_in_their_packages():
    named = names_outside_packages()
    assert not named, ("a framework's or workload's name outside its package (declare what it needs on its "
                       "record, or list the file in NAMED_FOR_A_REASON with why):\n  " + "\n  ".join(named))


def test_the_name_check_finds_a_branch_on_a_workloads_name(tmp_path):
    pkg = tmp_path / PACKAGE / "report"
    pkg.mkdir(parents=True)
    (pkg / "rows.py").write_text('"""Rows; the selftest\'s are left out."""\n\ndef keep(case):\n'
                                 '    """Not "gpt"."""\n    return case["workload"] != "selftest"\n')
    assert names_outside_packages(tmp_path) == ["report/rows.py:5: 'selftest'"]
