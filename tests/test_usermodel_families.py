"""Models people really have (docs/examples/model_families.py, built from configurations, no weights),
loaded as a case's worker loads them (tests/usermodel_probe.py), each with its forward FLOPs per sample
within 2% of an independent count, or n/a with a reason (model: its independent count):

- torchvision resnet18, vit_b_16: torchvision's published GMACs x 2 (1.814, 17.564);
- Hugging Face BERT-base, GPT-2 (128 tokens, sdpa attention, their default): the same model with eager
  attention, whose matmuls FlopCounterMode counts one by one;
- keras.applications MobileNetV2: its Conv2D, DepthwiseConv2D and Dense layers' multiply-adds from their
  configurations;
- xpubench's own gpt (small): the built-in workload's formula, T(2N + 4LCT).

torchvision's CPU build must match torch's (docs/your-model.md, "Install torchvision"); where it does
not import, its cases are skipped with the import error. And the model whose output is a Hugging Face
object runs through ``xpubench run --model``, its results saying where the logits came from.

Every model is probed in one process, made at the first test that asks (``probed``): one torch,
transformers and Keras import, not one per model.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from batch_worker import ONE_THREAD  # the probe counts FLOPs, it times nothing

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = ROOT / "docs" / "examples" / "model_families.py"
PROBE = Path(__file__).with_name("usermodel_probe.py")


def _probe(models: dict[str, str]) -> dict[str, dict]:
    """What tests/usermodel_probe.py finds for each of ``models`` (function: backend), in one process."""
    args = [arg for function, backend in models.items() for arg in (f"{FAMILIES}:{function}", backend)]
    done = subprocess.run([sys.executable, str(PROBE), *args], check=False, capture_output=True, text=True,
                          timeout=900, env={**os.environ, **ONE_THREAD, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(zip(models, map(json.loads, done.stdout.strip().splitlines()[-len(models):]), strict=True))


# the models the tests below probe, with the backend each runs on; Keras's on keras:torch (the one Keras
# backend of the probe's process)
PROBED = {"resnet18": "auto", "vit_b_16": "auto", "bert_classifier": "auto", "gpt2_lm": "auto",
          "mobilenet_v2": "keras:torch", "xpubench_gpt": "auto"}


@pytest.fixture(scope="module")
def probed() -> dict[str, dict]:
    """PROBED's models as found by the probe, all in one process (torchvision's where it imports)."""
    skip = {"resnet18", "vit_b_16"} if _importable("torchvision") else set()
    skip |= {"bert_classifier", "gpt2_lm"} if importlib.util.find_spec("transformers") is None else set()
    return _probe({function: backend for function, backend in PROBED.items() if function not in skip})


@functools.cache
def _importable(module: str) -> str | None:
    """None when ``module`` imports in a fresh interpreter, else why not (its last line); asked once per
    process (a torchvision import is a torch import, ~3 s of CPU)."""
    done = subprocess.run([sys.executable, "-c", f"import {module}"], check=False, capture_output=True, text=True,
                          timeout=300)
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1]


def _close(measured: float, independent: float) -> bool:
    return abs(measured / independent - 1) <= 0.02


@pytest.mark.slow
@pytest.mark.parametrize("function, published_gmac", [("resnet18", 1.814), ("vit_b_16", 17.564)])
def test_torchvision_models_match_the_published_flops(function, published_gmac, probed):
    why = _importable("torchvision")
    if why:
        pytest.skip(f"torchvision does not import beside this torch: {why}")
    found = probed[function]
    assert _close(found["flops"], 2 * published_gmac * 1e9), (found["flops"], found["flops_method"])
    assert found["model_output"] == "the output (Tensor)"


@pytest.mark.slow
@pytest.mark.parametrize("function, config, vocab", [("bert_classifier", "BertConfig", 30522),
                                                     ("gpt2_lm", "GPT2Config", 50257)])
def test_hugging_face_models_match_their_eager_attention_count(function, config, vocab, probed):
    pytest.importorskip("transformers")
    found = probed[function]
    assert "aten._scaled_dot_product_flash_attention_for_cpu (12 calls)" in found["flops_method"]
    assert found["model_output"].startswith(".logits of the output (")
    assert found["vocab_size"] == vocab
    # the same model with eager attention, every attention matmul an aten.bmm the counter sees (the probe
    # counts it after the worker's count)
    eager = found["eager_attention_flops"]
    assert _close(found["flops"], eager), (found["flops"], eager)
    if function == "bert_classifier":   # the vocabulary read from the model, not given
        assert found["vocab_size_source"] == f"the model's config.vocab_size ({config})"


@pytest.mark.slow
def test_keras_mobilenet_v2_matches_its_layers_count(probed):
    """On keras:torch FlopCounterMode counts the convolutions exactly: 601.5 MFLOP = 2 x the paper's
    300M multiply-adds. XLA (keras:jax) also counts the elementwise ops (batch norm, ReLU6, the
    residual adds) and leaves out padding: 3.0% above here, so that count is not the 2% check."""
    on_torch = probed["mobilenet_v2"]
    assert _close(on_torch["flops"], on_torch["layer_flops"]) and "FlopCounterMode" in on_torch["flops_method"]
    assert _close(on_torch["flops"], 2 * 300e6)
    assert on_torch["model_params"] == 3_504_872 and "model_warning" not in on_torch


@pytest.mark.slow
def test_xpubench_gpt_matches_its_formula(probed):
    from xpubench.workloads import gpt

    found = probed["xpubench_gpt"]
    assert "aten._scaled_dot_product_flash_attention_for_cpu (4 calls)" in found["flops_method"]
    assert _close(found["flops"], gpt.forward_flops(gpt.PRESETS["small"]))


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread_workers", "detected_once")
def test_a_hugging_face_model_runs_from_the_command_line_and_says_where_its_logits_came_from(tmp_path, monkeypatch,
                                                                                             capsys):
    """The command's main in this process (its cases in worker processes of their own, this machine detected
    once per test run): what the results say, not the process start (tests/test_exit_codes.py)."""
    pytest.importorskip("transformers")
    from xpubench import cli

    out = tmp_path / "results.jsonl"
    monkeypatch.chdir(tmp_path)
    code = cli.main(["run", "--model", f"{FAMILIES}:tiny_bert", "--mode", "train,infer", "--quick", "--processes", "1",
                     "-o", str(out)])
    assert code == 0, capsys.readouterr().err[-2000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    results = [r for r in rows if "status" in r]
    assert sorted(r["case"]["mode"] for r in results) == ["infer", "train"]
    for r in results:
        m = r["metrics"]
        assert r["status"] == "ok", r.get("message")
        assert m["model_output"] == ".logits of the output (SequenceClassifierOutput)"
        assert m["model_class"] == "BertForSequenceClassification"
        assert (m["vocab_size"], m["vocab_size_source"]) == (1000, "the model's config.vocab_size (BertConfig)")
        assert m["forward_flops_per_sample"] > 0 and "aten._scaled_dot_product_flash" in m["flops_method"]
        factor = 3 if r["case"]["mode"] == "train" else 1
        assert m["flops_per_sample"] == pytest.approx(factor * m["forward_flops_per_sample"])
