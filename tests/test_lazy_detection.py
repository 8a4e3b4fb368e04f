"""Detection reads only what the plan needs (issue 32, item 8): `xpubench run -b numpy` does not import torch
or JAX's devices; the backends it leaves out keep their versions, so the machine's identity (the ceilings
cache key) is the same as after a full detection. A machine that may have an accelerator detects every
backend (its accelerators are part of that identity)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from xpubench import api
from xpubench.backends import detect


def test_needed_names_each_backend_and_the_one_it_runs_on(monkeypatch):
    monkeypatch.setattr(detect, "accelerator_here", lambda: False)
    assert detect.needed(["numpy"]) == ["numpy"]
    assert detect.needed(["keras:jax"]) == ["keras", "jax"]
    assert detect.needed(["torch", "keras:torch"]) == ["torch", "keras"]
    assert set(detect.needed(["keras"])) == {"keras", "jax", "torch", "numpy"}   # keras:tensorflow: the host CPU
    assert detect.needed(None) is None and detect.needed(["auto"]) is None      # nothing named / not a backend
    monkeypatch.setattr(detect, "accelerator_here", lambda: True)
    assert detect.needed(["numpy"]) is None


def test_a_plan_of_numpy_detects_numpy_alone(monkeypatch):
    monkeypatch.setattr(detect, "accelerator_here", lambda: False)
    asked = []
    env = {"host": {"cpu": {}}, "backends": {"numpy": {"installed": True, "version": "2",
                                                       "devices": [{"id": "cpu", "kind": "cpu"}]}}}
    monkeypatch.setattr(api, "detect_environment", lambda **kw: asked.append(kw.get("backends")) or env)
    cases = api.plan(workloads=["matmul"], backends=["numpy"]).cases
    assert asked == [["numpy"]] and {c.backend for c in cases} == {"numpy"}
    api.plan(workloads=["matmul"])
    assert asked[-1] is None                                    # no -b: every backend


@pytest.mark.slow
@pytest.mark.skipif(detect.accelerator_here(), reason="an accelerator is part of the identity: detected in full")
def test_a_numpy_detection_imports_no_torch_and_keeps_the_machines_identity():
    code = textwrap.dedent("""
        import json, sys
        from xpubench.backends.detect import environment
        from xpubench.ceilings.cache import machine_key
        partial = environment(["numpy"])
        torch_imported = "torch" in sys.modules
        full = environment()
        print(json.dumps({"torch_imported": torch_imported, "torch": partial["backends"]["torch"],
                          "same_key": machine_key(partial) == machine_key(full),
                          "numpy_devices": len(partial["backends"]["numpy"]["devices"])}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert not facts["torch_imported"] and facts["same_key"] and facts["numpy_devices"] == 1
    assert facts["torch"]["detected"] is False and facts["torch"]["devices"] == [] and facts["torch"]["version"]
