"""Example user models for `xpubench run --model docs/examples/torch_models.py:FUNCTION` (PyTorch).

`small_cnn` returns the model and says what it takes; `tiny_mlp` returns the model alone, so its input
is given as options: `--model docs/examples/torch_models.py:tiny_mlp --input-shape 64 --task regression:3`.
"""

import torch
from torch import nn


class SmallCNN(nn.Module):
    """A 3-block CNN with batch norm for 32x32 RGB images, channels-last input (N, H, W, C) -> 10 logits."""

    def __init__(self, classes: int = 10):
        super().__init__()
        blocks, cin = [], 3
        for cout in (16, 32, 64):
            blocks += [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2)]
            cin = cout
        self.features = nn.Sequential(*blocks)
        self.head = nn.Linear(64 * 4 * 4, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x.permute(0, 3, 1, 2))
        return self.head(torch.flatten(x, 1))


def small_cnn():
    return {"model": SmallCNN(), "input_shape": (32, 32, 3), "input_dtype": "float32", "task": "classes:10"}


def tiny_mlp():
    return nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 3))
