"""Counting what a torch model runs (usermodel/torch_flops.py, flops.py): the kernels torch's
FlopCounterMode counts as 0 get formulas, each checked here against an independent count of the same
shapes (the math path, or plain arithmetic); a multiply-add op still without a formula makes the figure
n/a, naming it; a count that raises says why in one line."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from xpubench.usermodel.flops import count_failed, torch_flops
from xpubench.usermodel.torch_flops import count


def _math_path_flops(module: nn.Module, x) -> int:
    """The independent count: the module in training mode (no fast path) with attention on the math
    path, whose matmuls FlopCounterMode counts one by one."""
    module.train()
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        module(x)
    return counter.get_total_flops()


class SelfAttention(nn.Module):
    """nn.MultiheadAttention as torchvision's ViT calls it."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.attention(x, x, x, need_weights=False)[0]


def test_the_cpu_attention_kernel_is_counted_as_qk_and_av():
    """(1, 12, 197, 64): a ViT-B/16 head layout; 2 x 2 x 12 x 197 x 197 x 64 = 119,221,248 (torch's own
    counter reads 0 for aten._scaled_dot_product_flash_attention_for_cpu)."""
    q = torch.randn(1, 12, 197, 64)
    counted = count(lambda: nn.functional.scaled_dot_product_attention(q, q, q))
    assert counted.flops == 2 * 2 * 12 * 197 * 197 * 64 == 119_221_248
    assert counted.formulas == {"aten._scaled_dot_product_flash_attention_for_cpu": 1}


@pytest.mark.parametrize("build, fast_op", [
    (lambda: SelfAttention(32, 4), "aten._native_multi_head_attention"),
    (lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True), 2,
                                   enable_nested_tensor=False), "aten._transformer_encoder_layer_fwd"),
])
def test_fast_paths_count_what_the_math_path_counts(build, fast_op):
    torch.manual_seed(0)
    module, x = build(), torch.randn(2, 7, 32)
    module.eval()
    flops, method = torch_flops(lambda: module(x), module)
    assert fast_op in method                      # the fused kernel ran and was counted by formula
    assert flops == _math_path_flops(module, x) > 0


def test_matrix_vector_products_are_counted():
    a, v = torch.randn(6, 5), torch.randn(5)
    assert count(lambda: (torch.mv(a, v), torch.dot(v, v), torch.addmv(torch.zeros(6), a, v))).flops == \
        2 * 6 * 5 + 2 * 5 + 2 * 6 * 5


class Spectral(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(5, 2)

    def forward(self, x):
        return self.head(torch.fft.rfft(x).abs())


def test_a_multiply_add_op_without_a_formula_makes_the_figure_unknown():
    model, x = Spectral(), torch.randn(1, 8)
    flops, method = torch_flops(lambda: model(x), model)
    assert flops is None
    assert method.startswith("n/a (torch FlopCounterMode has no formula for aten._fft_r2c (1 call)")


def test_counting_leaves_the_parameters_trainable():
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    assert torch_flops(lambda: model(torch.zeros(1, 4)), model)[0] == 2 * (4 * 3 + 3 * 2)
    assert all(p.requires_grad for p in model.parameters())


def test_a_count_that_fails_names_the_innermost_cause_without_a_frameworks_wrapper():
    def counter_hook():
        raise AssertionError("Expected gradient function to be set")

    try:
        try:
            counter_hook()
        except AssertionError as inner:   # Keras's way of wrapping an exception raised inside a layer
            raise AssertionError("Exception encountered when calling BertBackbone.call().\n\n"
                                 "\x1b[1mExpected gradient function to be set\x1b[0m\n\nArguments received") from inner
    except AssertionError as exc:
        reason = count_failed(exc)
    assert reason == ("n/a (the FLOP count failed in test_usermodel_flops.py:counter_hook: AssertionError: "
                      "Expected gradient function to be set; the case is measured without it)")
