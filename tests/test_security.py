"""No code path unpickles downloaded or user data.

Pickle (and the loaders built on it) run arbitrary code from a crafted file. xpubench reads datasets
in their plain formats (IDX, CIFAR binary, text, CSV; the Keras imdb.npz through a restricted opcode
reader that never unpickles), results as JSON and configs as TOML. Related
checks live with their modules: archive extraction refusing paths that escape the target folder and
checksum-verified downloads (tests of xpubench.data), HTML escaping of every text (tests of
xpubench.report).
"""

import ast
from pathlib import Path

from source_trees import file_nodes

SRC = Path(__file__).resolve().parents[1] / "src" / "xpubench"
UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "shelve", "marshal", "joblib"}


def _name(node: ast.AST) -> str:
    """Dotted name of a call target: np.load, torch.load, pickle.loads..."""
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _keyword(call: ast.Call, name: str):
    for kw in call.keywords:
        if kw.arg == name and isinstance(kw.value, ast.Constant):
            return kw.value.value
    return None


def unsafe_uses(path: Path) -> list[str]:
    found = []
    for node in file_nodes(path):
        where = f"{path.name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            found += [f"{where}: import {a.name}" for a in node.names if a.name.split(".")[0] in UNSAFE_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UNSAFE_MODULES:
            found.append(f"{where}: from {node.module} import ...")
        elif isinstance(node, ast.Call):
            name = _name(node.func)
            if _keyword(node, "allow_pickle") is True:
                found.append(f"{where}: {name}(allow_pickle=True)")
            if name.endswith("torch.load") and _keyword(node, "weights_only") is not True:
                found.append(f"{where}: torch.load without weights_only=True")
            if name in ("yaml.load", "yaml.unsafe_load") and _keyword(node, "Loader") is None:
                found.append(f"{where}: {name} without a safe Loader")
            if name in ("eval", "exec"):
                found.append(f"{where}: {name}()")
    return found


def test_no_pickle_or_code_loading_anywhere_in_src():
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 10
    problems = [p for f in files for p in unsafe_uses(f)]
    assert problems == []


def test_plain_text_scan_agrees():
    """A blunt second check that also sees strings handed to exec-like helpers."""
    for f in SRC.rglob("*.py"):
        text = f.read_text(encoding="utf-8")
        assert "allow_pickle=True" not in text, f
        assert "import pickle" not in text, f
        for line in text.splitlines():
            if "torch.load(" in line:
                assert "weights_only=True" in line, f"{f}: {line.strip()}"


def test_the_checker_catches_what_it_should(tmp_path):
    bad = tmp_path / "probe.py"
    bad.write_text("import pickle\nimport numpy as np\nimport torch\n"
                   "np.load('x', allow_pickle=True)\ntorch.load('m')\ntorch.load('m', weights_only=True)\n")
    assert len(unsafe_uses(bad)) == 3
