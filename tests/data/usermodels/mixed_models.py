"""A file holding a torch, a flax and a Keras model (tests/test_usermodel_plan.py): each function is
planned on its own framework."""

import flax.linen as fnn
import keras
from torch import nn


class TorchMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(x)


def torch_mlp():
    return {"model": TorchMLP(), "input_shape": (16,), "task": "classes:4"}


class FlaxMLP(fnn.Module):
    @fnn.compact
    def __call__(self, x):
        return fnn.Dense(4)(x)


def flax_mlp():
    return {"model": FlaxMLP(), "input_shape": (16,), "task": "classes:4"}


def keras_mlp():
    return {"model": keras.Sequential([keras.Input((16,)), keras.layers.Dense(4)]), "input_shape": (16,),
            "task": "classes:4"}


def local_import():
    import torch as t

    return {"model": t.nn.Linear(16, 4), "input_shape": (16,), "task": "classes:4"}


def plain_python():
    return {"model": None}
