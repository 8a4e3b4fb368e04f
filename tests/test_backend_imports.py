"""What is installed is what is said (issue 52 item 5): each backend declares the modules its workers import
(``Backend.imports``), checked here against the imports of its code; one not found is said by `env`,
`doctor` and the plan (refused when named, left out of the default run, with the command that installs
it), never found by a worker's ModuleNotFoundError; and no install hint is cut, at 80 columns either.

JAX without optax is made by hiding optax: ``sys.modules["optax"] = None`` (``importlib.util.find_spec``
then finds nothing and ``import optax`` raises ModuleNotFoundError), in this process with monkeypatch, and
in a child through a ``sitecustomize`` on PYTHONPATH (every process it starts inherits it)."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata as md
import importlib.util
import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

import xpubench
from xpubench import backends, doctor
from xpubench.devices.render import render_environment
from xpubench.errors import UserError
from xpubench.plan import PlanRequest, build_cases
from xpubench.plan.notes import plan_notes
from xpubench.plan.options_text import read_toml
from xpubench.report.sentences.answer import skipped_line
from xpubench.workloads import REGISTRY, get_workload

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = read_toml(str(ROOT / "pyproject.toml"), "pyproject")["project"]
JAX_HINT = 'pip install "xpubench[jax]"'


def _name(requirement: str) -> str:
    return requirement.split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower()


CORE = {_name(r).replace("-", "_") for r in PYPROJECT["dependencies"]}   # xpubench's own: always there


def _third_party(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
        found |= {n.split(".")[0] for n in names}
    return {n for n in found if n not in sys.stdlib_module_names and n not in ("xpubench", "__future__")}


def imported_by(name: str) -> set[str]:
    """The top-level modules a backend's workers import: its package's code (or module, and its ceiling
    module), the builders of every workload it runs (its family's model, generation model and optimizer,
    and its own), and what its fork server preloads."""
    record = backends.get(name)
    module = importlib.import_module(type(record).__module__)
    where = Path(module.__file__)
    files = sorted(where.parent.rglob("*.py")) if where.name == "__init__.py" else [where]
    if record.ceiling_module:
        files.append(Path(importlib.util.find_spec(record.ceiling_module).origin))   # found, not imported
    trees = [ast.parse(f.read_text()) for f in files]
    family = record.family(name)
    for workload in map(get_workload, REGISTRY):
        if record.supports(workload, name):
            for builder in (workload.models.get(family), workload.generation_models.get(family),
                            workload.optimizers.get(family), record.models.get(workload.name)):
                if builder is not None:
                    trees.append(ast.parse(textwrap.dedent(inspect.getsource(builder))))
    return set().union(*map(_third_party, trees)) | {m.split(".")[0] for m in record.preload}


@pytest.mark.parametrize("name", list(backends.REGISTRY))
def test_each_backend_declares_exactly_the_modules_its_workers_import(name):
    record = backends.get(name)
    found = imported_by(name)
    # beyond xpubench's own dependencies; keras: the frameworks it runs on (its ``installed`` checks them)
    undeclared = found - set(record.imports) - CORE - set(record.variants)
    assert not undeclared, f"{name}'s code imports {sorted(undeclared)}: add them to its record's imports"
    stale = set(record.imports) - found
    assert not stale, f"{name}'s record declares {sorted(stale)}, which none of its code imports"
    assert not record.module or record.module in record.imports


@pytest.mark.parametrize("name", list(backends.REGISTRY))
def test_each_install_hint_installs_every_module_its_workers_import(name):
    record = backends.get(name)
    hint = record.install_hint()
    extra = hint.partition("xpubench[")[2].partition("]")[0]
    given = ({_name(r) for r in PYPROJECT["optional-dependencies"][extra]} if extra else set()) | set(CORE)
    owners = md.packages_distributions()
    for module in record.imports:
        assert {d.lower() for d in owners.get(module, [module])} & given, f"{hint} does not install {module}"
    # an engine that only serves (vLLM, SGLang) imports nothing in its workers: its hint installs its server
    assert extra or hint == f"pip install {' '.join(record.imports)}" or (not record.imports and record.server())


@pytest.fixture
def no_optax(monkeypatch) -> dict:
    """A CPU machine with numpy, torch and jax, whose jax record says what detection finds with optax hidden."""
    from xpubench.backends.detect import missing_imports

    monkeypatch.setitem(sys.modules, "optax", None)
    cpu = {"id": "cpu", "kind": "cpu", "name": "AMD EPYC", "memory_bytes": 24 << 30, "peak_is_estimate": True,
           "peak_flops": {"fp32": 2e11, "bf16": 2e11}}
    env = {"host": {"cpu": {"flags": ["avx2", "fma"], "usable_cores": 2,
                            "peak_estimate": {"fp32": {"value": 2e11}}}},
           "backends": {b: {"installed": True, "version": "1", "devices": [dict(cpu)]}
                        for b in ("numpy", "torch", "jax")},
           "variables": {}}
    for name in env["backends"]:
        env["backends"][name].update(missing_imports(backends.get(name)))
    assert env["backends"]["jax"]["missing_imports"] == ["optax"]
    assert "missing_imports" not in env["backends"]["torch"]
    return env


def folded(text: str) -> str:
    return " ".join(text.split())


def test_env_says_what_is_missing_and_how_to_install_it_whole_at_80_columns(no_optax):
    console = Console(record=True, width=80)
    render_environment(no_optax, console)
    text = folded(console.export_text())
    assert f"jax 1, 1 device - missing optax, which its cases import: {JAX_HINT}" in text
    assert "torch 1, 1 device" in text and "torch 1, 1 device -" not in text


def test_the_plan_refuses_a_named_backend_and_leaves_it_out_of_a_default_run(no_optax):
    with pytest.raises(UserError) as refused:
        build_cases(PlanRequest(workloads=["matmul"], backends=["jax"]), no_optax)
    assert str(refused.value) == f"jax's workers import optax, which is not installed here: {JAX_HINT}"
    request = PlanRequest(workloads=["matmul"])
    cases = build_cases(request, no_optax)
    assert cases and not [c for c in cases if c.backend == "jax"]
    assert f"no jax cases: jax's workers import optax, which is not installed here: {JAX_HINT}" in plan_notes(
        request, no_optax, cases, environ={})


def test_doctor_fails_a_backend_missing_a_module_and_says_the_fix_whole_at_80_columns(no_optax):
    probed = []
    ok = {"asynchronous": False, "placement": "cpu", "errors": {}}
    rows = doctor.diagnose(no_optax, environ={}, probe=lambda cfg: probed.append(cfg["backend"]) or ok,
                           busy=lambda: 0.0)
    failed = [(r.backend, r.check, r.reason) for r in rows if r.status == doctor.FAIL]
    assert failed == [("jax", "imports", f"jax's workers import optax, which is not installed here: {JAX_HINT}")]
    assert probed == ["numpy", "torch"] and doctor.exit_code(rows) == 1
    console = Console(record=True, width=80)
    doctor.render(rows, console)
    lines = console.export_text().splitlines()
    assert all(len(line) <= 80 for line in lines)
    cells = folded(" ".join(line.split("│")[-2] for line in lines if line.startswith("│")))
    assert JAX_HINT in cells and "send docs/accelerators.md" not in lines[-1]
    with pytest.raises(UserError, match="optax"):
        doctor.diagnose(no_optax, backends=["jax"], environ={}, probe=lambda cfg: ok, busy=lambda: 0.0)


def test_a_reason_a_case_did_not_finish_is_never_cut():
    why = 'llama.cpp cases write a GGUF with the gguf package: pip install "xpubench[llamacpp]"'
    frame = pd.DataFrame([{"key": k, "status": "skipped", "message": why}
                          for k in ("a/llamacpp/bf16", "b/llamacpp/int8")])
    assert skipped_line(frame) == f"did not finish: a/llamacpp/bf16, b/llamacpp/int8: skipped ({why})"


def test_a_run_in_a_child_without_optax_is_refused_in_one_line(tmp_path):
    """End to end: `xpubench run -b jax` where optax is hidden from every process (its detection child too)."""
    (tmp_path / "sitecustomize.py").write_text('import sys\nsys.modules["optax"] = None\n')
    src = Path(xpubench.__file__).parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(src)]))
    done = subprocess.run([sys.executable, "-m", "xpubench", "run", "-w", "matmul", "-b", "jax", "--dry-run"],
                          capture_output=True, text=True, env=env, timeout=240, cwd=tmp_path, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (f"xpubench: error: jax's workers import optax, which is not installed here: "
                                   f"{JAX_HINT}")
