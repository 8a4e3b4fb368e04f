"""usermodel/notebook.py: a notebook's model function rebuilt from source in a module file a worker can
import (never pickled), or refused with the name that can't be rebuilt and what running in process loses.
The notebook is simulated the way IPython runs cells: source kept in linecache under a cell filename,
code executed in a ``__main__`` namespace."""

from __future__ import annotations

import linecache
from pathlib import Path

import numpy as np
import pytest

from xpubench.usermodel.load import import_function
from xpubench.usermodel.notebook import IN_PROCESS_LOSES, NotIsolatable, isolate, reference_for
from xpubench.usermodel.reference import parse_reference

CELLS = [
    "import torch\nfrom torch import nn\nimport math\nWIDTH = 32\n",
    ("class Block(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
     "        self.lin = nn.Linear(n, n)\n\n    def forward(self, x):\n        return torch.relu(self.lin(x))\n"),
    ("def make_model():\n    x = int(math.sqrt(WIDTH * WIDTH))\n"
     "    return nn.Sequential(nn.Flatten(), Block(x), nn.Linear(x, 10))\n"),
]


def notebook(*cells: str) -> dict:
    ns = {"__name__": "__main__"}
    for i, cell in enumerate(cells):
        name = f"<ipython-input-{i}-0123456789ab>"
        linecache.cache[name] = (len(cell), None, cell.splitlines(True), name)
        exec(compile(cell, name, "exec"), ns)  # noqa: S102 - how IPython runs a cell
    return ns


def test_a_notebook_function_is_rebuilt_in_a_module_file_a_worker_imports(tmp_path):
    ns = notebook(*CELLS)
    ref = isolate(ns["make_model"], tmp_path)
    source = Path(ref.rpartition(":")[0]).read_text()
    assert "import torch" in source and "WIDTH = 32" in source and "class Block" in source
    assert "pickle" not in source
    model = import_function(parse_reference(ref))()
    import torch

    assert model(torch.zeros(2, 32)).shape == (2, 10)
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in ns["make_model"]().parameters())


def test_an_edited_notebook_function_keeps_its_file_and_so_its_results_key(tmp_path):
    first = isolate(notebook(*CELLS)["make_model"], tmp_path)
    edited = isolate(notebook(*CELLS[:2], CELLS[2].replace("nn.Linear(x, 10)", "nn.Linear(x, 12)"))["make_model"],
                     tmp_path)
    assert first == edited   # the key ends with this file, as a .py file's does across edits
    assert "nn.Linear(x, 12)" in Path(edited.rpartition(":")[0]).read_text()


def test_a_value_made_in_the_notebook_is_named_and_falls_back_in_process(tmp_path):
    ns = notebook(*CELLS, "def scaled():\n    return nn.Linear(int(weights.sum()), 2)\n")
    ns["weights"] = np.ones(4)
    with pytest.raises(NotIsolatable, match="weights is a ndarray made in the notebook"):
        isolate(ns["scaled"], tmp_path)
    fn, warning = reference_for(ns["scaled"])
    assert fn is ns["scaled"] and "weights" in warning and IN_PROCESS_LOSES in warning


def test_closures_and_lambdas_are_refused_with_the_reason():
    def outer():
        size = 3

        def inner():
            return size
        return inner
    with pytest.raises(NotIsolatable, match="closes over local variables size"):
        isolate(outer())
    with pytest.raises(NotIsolatable, match="lambda"):
        isolate(lambda: None)


def test_a_reference_string_passes_through():
    assert reference_for("docs/examples/torch_models.py:small_cnn") == ("docs/examples/torch_models.py:small_cnn", None)
