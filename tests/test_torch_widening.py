"""Half-precision prefill on a CPU without half instructions (workloads/llama/torch_weights.py): the
matmuls of many rows computed in fp32 and rounded back, what the record says, and what keeps its path."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from xpubench.workloads.llama import torch_weights
from xpubench.workloads.llama.config import preset
from xpubench.workloads.llama.torch_model import build

TINY = dataclasses.replace(preset("smollm-135m"), n_layers=1, vocab_size=256)
CPU = torch.device("cpu")


@pytest.fixture
def without_bf16(monkeypatch):
    """This CPU as one without bf16 instructions (the project's Zen VMs are; an AMX Xeon is not)."""
    monkeypatch.setattr(torch_weights, "native_half", lambda dtype: dtype == torch.float32)


def test_only_many_rows_of_half_inputs_without_gradients_are_widened(without_bf16):
    many, one = torch.ones(2, 17, 8, dtype=torch.bfloat16), torch.ones(1, 1, 8, dtype=torch.bfloat16)
    with torch.no_grad():
        assert torch_weights.widened(many)
        assert not torch_weights.widened(one)                  # decode: one row keeps its path
        assert not torch_weights.widened(many[:, :8])          # 16 rows: PACKED_MAX_ROWS
        assert not torch_weights.widened(many.float())
    assert not torch_weights.widened(many)                     # training asked for bf16 kernels


def test_native_half_reads_this_cpu():
    assert torch_weights.native_half(torch.bfloat16) == (torch.cpu._is_avx512_bf16_supported()
                                                         or torch.cpu._is_amx_tile_supported())


@pytest.mark.parametrize("fmt", ["bf16", "int8"])
def test_a_widened_prefill_gives_the_native_logits_to_bf16_rounding_and_says_so(without_bf16, monkeypatch, fmt):
    model = build(TINY, fmt, seed=1)
    idx = torch.randint(0, TINY.vocab_size, (1, 40), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        widened = model(idx, model.new_cache(1, 48), 0).float()
        decode_widened = model(idx[:, :1], model.new_cache(1, 48), 0).float()
    monkeypatch.setattr(torch_weights, "native_half", lambda dtype: True)
    with torch.inference_mode():
        native = model(idx, model.new_cache(1, 48), 0).float()
        decode_native = model(idx[:, :1], model.new_cache(1, 48), 0).float()
    assert not torch.equal(widened, native)                   # another computation ...
    torch.testing.assert_close(widened, native, atol=0.05, rtol=0.02)   # ... to bf16's rounding
    assert torch.equal(decode_widened, decode_native)         # one row: the same path
    monkeypatch.setattr(torch_weights, "native_half", lambda dtype: dtype == torch.float32)
    facts = model.generation_facts()
    assert facts["matmul_widening"] == ("matmuls of more than 16 rows (prefill) computed in fp32, not bf16, and "
                                        "rounded back to bf16: this CPU has no bf16 matmul instructions")
    assert build(TINY, "fp32").generation_facts()["matmul_widening"] is None
