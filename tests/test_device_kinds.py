"""Device kinds have one typed home (devices/device.py): every spelling a user or a framework writes reads
to a ``Kind`` whose record says what readers ask (accelerator, shared, indexed), and no code outside
devices/ compares a device id or kind with a string ("cpu", "gpu", ...): a structure check over the source
fails on a new one (issue 53 item 4)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from machine_facts import MACHINES
from source_trees import file_nodes

from xpubench import api, cli
from xpubench.backends.envfile import load_environment
from xpubench.cli.run import request_from
from xpubench.devices.detect import resolve_device
from xpubench.devices.device import CPU, GPU, KINDS, MPS, TPU, Device, device_id, is_accelerator, kind_of, spelled
from xpubench.errors import UserError

SRC = Path(__file__).resolve().parents[1] / "src" / "xpubench"
WORDS = {*KINDS, "cuda", "rocm", "hip", "metal"}   # device kinds and the spellings that read as one
# A framework's own device vocabulary is not xpubench's kind: torch's ``device.type`` ("cuda" is ROCm too),
# JAX's ``device.platform`` and ``jax.default_backend()`` are compared with the framework's words where its
# objects are used. These files compare a framework's words for a reason of their own:
FRAMEWORK_WORDS = {
    "backends/jax_/detect.py": "JAX's plugin names (xla_bridge's 'cuda', 'tpu'): which plugin failed to load",
}


def _word(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.lower() in WORDS
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(_word(e) for e in node.elts)


def _framework_object(node: ast.AST) -> bool:
    """``x.type`` (torch), ``x.platform`` (JAX) or ``jax.default_backend()``: the framework's own words."""
    if isinstance(node, ast.Call):
        node = node.func
        return isinstance(node, ast.Attribute) and node.attr == "default_backend"
    return isinstance(node, ast.Attribute) and node.attr in ("type", "platform")


def kind_comparisons(root: Path = SRC) -> list[str]:
    """``file:line: code`` for each comparison of a device kind's word ("cpu", "gpu", "cuda", ...) with
    ``==``, ``!=``, ``in`` or ``.startswith`` outside devices/, but with a framework's own device object
    (``_framework_object``) and in the files of ``FRAMEWORK_WORDS``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("devices/") or rel in FRAMEWORK_WORDS:
            continue
        for node in file_nodes(path):
            if isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                sides = [node.left, *node.comparators]
                if any(map(_word, sides)) and not any(map(_framework_object, sides)):
                    found.append((rel, node.lineno, ast.unparse(node)))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in ("startswith", "endswith") and node.args and _word(node.args[0])):
                found.append((rel, node.lineno, ast.unparse(node)))
    return [f"{rel}:{line}: {code}" for rel, line, code in sorted(found)]


def test_no_device_kind_is_compared_as_a_string_outside_devices():
    found = kind_comparisons()
    assert not found, ("a device kind compared as a string: ask its record instead (devices/device.py: "
                       "kind_of(device).accelerator, kind_of(device) is GPU, Device.parse(device).index):\n  "
                       + "\n  ".join(found))


def test_the_check_finds_each_kind_of_comparison(tmp_path):
    (tmp_path / "report" / "tables").mkdir(parents=True)
    (tmp_path / "report" / "tables" / "cases.py").write_text(
        'def f(case, rows, d):\n'
        '    a = case.device == "cpu"\n'
        '    b = rows[rows["device"] != "cpu"]\n'
        '    c = d.startswith("gpu")\n'
        '    e = d.partition(":")[0] in ("cuda", "rocm")\n'
        '    return d.type == "cuda", "cpu"\n')   # a framework's device.type, and a value (not a test): fine
    (tmp_path / "devices").mkdir()
    (tmp_path / "devices" / "device.py").write_text('X = "cpu" == "cpu"\n')   # the kinds' own home
    assert [line.split(": ")[0] for line in kind_comparisons(tmp_path)] == [
        "report/tables/cases.py:2", "report/tables/cases.py:3", "report/tables/cases.py:4", "report/tables/cases.py:5"]


@pytest.mark.parametrize("text, kind, index", [
    ("cpu", CPU, None), ("cpu:1", CPU, 1), ("gpu", GPU, None), ("CUDA:1", GPU, 1), ("rocm:0", GPU, 0),
    ("hip:2", GPU, 2), ("tpu", TPU, None), ("tpu:3", TPU, 3), ("mps", MPS, None), ("metal", MPS, None),
])
def test_every_spelling_reads_to_its_kind(text, kind, index):
    assert spelled(text) == (kind, index)
    assert Device.parse(text) == Device(kind, index or 0)
    assert kind_of(text) is kind and is_accelerator(text) == kind.accelerator


@pytest.mark.parametrize("text", ["xpu", "gpu:x", "mps:1", "", "cpu:", "remote"])
def test_a_spelling_that_is_no_device_is_refused(text):
    with pytest.raises(ValueError, match="unknown device"):
        spelled(text)


def test_what_each_kind_says():
    assert [k.name for k in KINDS.values() if k.accelerator] == ["gpu", "tpu", "mps"]
    assert CPU.shared and not GPU.shared and not TPU.shared          # CPU "devices" share one chip
    assert not MPS.indexed and str(Device(MPS)) == "mps" and str(Device(CPU)) == "cpu"
    assert device_id(GPU, 1) == "gpu:1" and device_id("METAL", 0) == "mps" and device_id(CPU, 2) == "cpu:2"
    assert kind_of("npu:0").accelerator and kind_of("npu:0").name == "npu"   # a newer record's kind


def test_a_remote_servers_machine_is_neither_this_cpu_nor_an_accelerator():
    """`serve --url` without -d records the device "remote": a machine xpubench never saw. It is no
    accelerator to recommend or to rank against the CPU (it was one, as an unknown kind), and not this host's
    CPU (whose name, speed-up baseline and plan notes are the client's); -d does not take it."""
    from xpubench.devices.device import REMOTE, is_cpu
    from xpubench.serve.keys import REMOTE as SERVED_REMOTE

    assert kind_of(SERVED_REMOTE) is REMOTE and not is_accelerator(SERVED_REMOTE) and not is_cpu(SERVED_REMOTE)
    assert is_cpu("cpu") and is_cpu("cpu:1") and not is_cpu("gpu:0") and not is_cpu("mps")


def test_metal_and_hip_resolve_to_a_device_like_every_other_spelling():
    env = {"backends": {"jax": {"installed": True, "devices": [{"id": "cpu", "kind": "cpu"},
                                                               {"id": "mps", "kind": "mps"}]},
                        "torch": {"installed": True, "devices": [{"id": "gpu:0", "kind": "gpu"}]}}}
    assert resolve_device(env, "jax", "metal") == "mps"
    assert resolve_device(env, "torch", "hip") == "gpu:0" and resolve_device(env, "torch", "CUDA:0") == "gpu:0"
    with pytest.raises(UserError, match="there is one mps device"):
        resolve_device(env, "jax", "mps:1")


def test_hip_prices_a_gpu_as_the_device_flag_reads_it():
    args = cli.build_parser().parse_args(["run", "-w", "matmul", "--size", "64", "-b", "torch", "-p", "fp32",
                                          "-d", "gpu:0,gpu:1", "--price-per-hour", "hip:1=3", "--env-file",
                                          str(MACHINES / "h100-sxm.json")])
    request, _ = request_from(args)
    cases = api.plan(request, environment=load_environment(args.env_file)).cases
    assert {c.device: c.options.get("price_per_hour") for c in cases} == {"gpu:0": None, "gpu:1": 3.0}
